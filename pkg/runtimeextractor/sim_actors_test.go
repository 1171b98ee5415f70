package runtimeextractor

// The convergence model's runs, and what the other actors do: admins,
// other writers, the DaemonSet controller, the API server's refusals.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// ---- the run ----

func (s *propSim) runRandom() {
	init := []initialObject{initialNone, initialNone, initialDesired, initialOldVersion}[s.rng.IntN(4)]
	s.start(s.rng.IntN(3) != 0, init)
	for n := s.rng.IntN(propertyMaxSteps + 1); s.steps < n && len(s.violations) == 0; {
		s.randomStep()
	}
	if len(s.violations) == 0 {
		s.settleAndCheck()
	}
}

// start stages the initial cluster, fills the cache as the initial list would,
// and does what Run does before its loop: read the version, re-assert.
func (s *propSim) start(enabled bool, init initialObject) {
	s.cfg.disabled = !enabled
	what := "no DaemonSet"
	if init != initialNone {
		version := s.ver.Version()
		if init == initialOldVersion {
			version = "4.20.0"
		}
		ds := s.previousIncarnation(version)
		idx := s.ri.informer.GetIndexer()
		s.must(idx.Add(ds))
		s.ri.onAdd(ds, true)
		what = "DaemonSet " + describeDS(ds) + " from a previous incarnation"
	}
	s.drainWatch() // the initial state is not an event
	s.inFlight = nil
	s.logf("start: %s, version %s, %s", map[bool]string{true: "enabled", false: "disabled"}[enabled], s.ver.Version(), what)
	s.controller("startup", func() { s.c.step(s.ctx, core.Input{Kind: core.InputStart}) })
}

// previousIncarnation writes, with a manager of its own, the DaemonSet an
// earlier controller process would have left, rolled out.
func (s *propSim) previousIncarnation(version string) *appsv1.DaemonSet {
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	m := resources.NewManager(s.api.Client, appslisters.NewDaemonSetLister(empty), s.rec, resources.Desired{})
	res, err := m.Apply(s.ctx, resources.Desired{Images: resources.DefaultImages(), Version: version})
	s.must(err)
	ds := res.Object.DeepCopy()
	ds.Status = s.worldStatus(ds.Generation)
	return s.writeStatus(ds)
}

func (s *propSim) randomStep() {
	type step struct {
		weight int
		do     func()
		// consequence: the step plays out an earlier stimulus (handles a
		// ready source, delivers events); it does not renew the budget.
		consequence bool
	}
	steps := []step{
		{3, s.flipConfig, false},
		{1, s.changePriorityClass, false},
		{2, s.bumpVersion, false},
		{1, s.deleteExternally, false},
		{1, s.changeSpecExternally, false},
		{1, s.addExternally, false},
		{1, s.replaceExternally, false},
		{1, s.replaceWithAnotherSelector, false},
		{1, s.revertMetadata, false},
		{1, s.breakConfig, false},
		{1, s.restart, false},
		{1, s.holdPod, false},
		{1, s.dropNode, false},
		{1, s.timePasses, false},
		{1, s.runToQuiet, false},
		{1, func() {
			keys := slices.Sorted(maps.Keys(resources.OwnedLabels()))
			s.removeLabel(keys[s.rng.IntN(len(keys))])
		}, false},
		{1, s.createExternally, false},
		{1, func() { s.fight(2 + s.rng.IntN(40)) }, false},
		{1, s.burstAfterOtherEdits, false},
		{2, s.toggleRefusal, false},
		{2, s.rollOut, false},
		{1, func() { s.statusNoise(s.rng.IntN(2) == 0) }, false},
		{4, func() {
			if len(s.inFlight) > 0 {
				s.deliver(1 + s.rng.IntN(len(s.inFlight)))
			}
		}, true},
		{1, s.relist, false},
		{1, s.timerBeforeNotice, true},
		{6, func() {
			if r := s.ready(); len(r) > 0 {
				s.dispatch(pick(r, s.rng.IntN).wake)
			}
		}, true},
		{1, func() {
			s.tickResync()
			s.dispatch(pick(s.ready(), s.rng.IntN).wake)
		}, false},
		{2, func() {
			if at, pending := s.c.core.At(core.PartRetry); pending {
				s.advanceTo(at, "the retry")
				s.dispatch(pick(s.ready(), s.rng.IntN).wake)
			}
		}, false},
	}
	total := 0
	for _, st := range steps {
		total += st.weight
	}
	n := s.rng.IntN(total)
	for _, st := range steps {
		if n < st.weight {
			before := len(s.log)
			if !st.consequence {
				s.stimulus()
			}
			st.do()
			if len(s.log) > before {
				s.steps++
			}
			return
		}
		n -= st.weight
	}
}

// ---- what other actors do ----

func (s *propSim) flipConfig() {
	s.cfg.disabled = !s.cfg.disabled
	s.cfg.invalid, s.cfg.good = false, true
	s.notifyConfig()
	s.logf("config: runtime extractor %s", map[bool]string{true: "disabled", false: "enabled"}[s.cfg.disabled])
}

// changePriorityClass is an insights-config change that keeps the runtime
// extractor enabled and changes its pods' priority class: an apply that is
// no repair.
func (s *propSim) changePriorityClass() {
	s.cfg.priority = map[string]string{"": "system-node-critical", "system-node-critical": ""}[s.cfg.priority]
	s.cfg.invalid, s.cfg.good = false, true
	s.notifyConfig()
	s.logf("config: priority class %q", s.cfg.priority)
}

// breakConfig makes insights-config invalid: the last good value stays.
func (s *propSim) breakConfig() {
	if s.cfg.invalid {
		return
	}
	s.cfg.invalid = true
	s.notifyConfig()
	s.logf("config: insights-config turns invalid")
}

// restart is a new controller process: the old one stops (its in-flight
// events die with its watch), the new one lists what the server holds and
// re-asserts, as Run does at start.
func (s *propSim) restart() {
	if s.c != nil {
		s.shutdown()
	}
	s.cfg.good = !s.cfg.invalid
	s.inFlight = nil
	s.drainLoopInputs()
	s.unseenOther, s.seenOther, s.observed, s.lossy, s.lastApply = 0, 0, nil, false, nil
	s.repairTimes, s.foreignBeforeBoot = nil, s.foreignOutstanding
	s.drainVersionSignal()
	s.boot()
	what := "no DaemonSet"
	if ds := s.stored(); ds != nil {
		s.must(s.ri.informer.GetIndexer().Add(ds))
		s.ri.onAdd(ds, true)
		what = describeDS(ds)
	}
	s.logf("controller restarts (lists %s)", what)
	s.controller("startup", func() { s.c.step(s.ctx, core.Input{Kind: core.InputStart}) })
}

// drainLoopInputs drops a config notification and a resync tick the old
// process had not taken: the new one reads everything at start.
func (s *propSim) drainLoopInputs() {
	select {
	case <-s.configHint:
	default:
	}
	select {
	case <-s.resyncTick: // the old process's ticker
	default:
	}
}

func (s *propSim) drainVersionSignal() {
	select {
	case <-s.ver.changed:
	default:
	}
}

// timePasses moves the clock past the manager's expectation timeout.
func (s *propSim) timePasses() {
	s.clock.SetTime(s.clock.Now().Add(resources.ExpectationTimeout))
	s.logf("time passes (%s)", resources.ExpectationTimeout)
}

// stimulus marks an outside change: the request budget starts again.
func (s *propSim) stimulus() { s.sinceStimulus, s.handled = 0, 0 }

func (s *propSim) bumpVersion() {
	s.versionSeq++
	v := fmt.Sprintf("4.%d.0", 21+s.versionSeq)
	s.ver.set(v)
	s.logf("cluster version: %s", v)
}

func (s *propSim) toggleRefusal() {
	verbs := []string{"create", "update", "delete"}
	if s.rng.IntN(4) == 0 {
		for _, v := range verbs {
			s.setRefused(v, false)
		}
		return
	}
	v := verbs[s.rng.IntN(len(verbs))]
	s.setRefused(v, !s.refused[v])
}

func (s *propSim) setRefused(verb string, on bool) {
	if s.refused[verb] == on {
		return
	}
	s.refused[verb] = on
	s.logf("api: %s of the DaemonSet %s", verb, map[bool]string{true: "refused", false: "allowed again"}[on])
}

func (s *propSim) deleteExternally() {
	if s.stored() == nil {
		return
	}
	s.must(s.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName))
	s.logf("someone else deletes the DaemonSet")
	s.drainWatchAs(byOther)
}

func (s *propSim) changeSpecExternally() {
	s.updateAsOther(func(ds *appsv1.DaemonSet) string {
		if s.rng.IntN(2) == 0 {
			ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
			return "changes the extractor image"
		}
		ds.Spec.MinReadySeconds++
		return "bumps minReadySeconds"
	})
}

// updateAsOther is someone else's update of the DaemonSet (see writeAsOther).
func (s *propSim) updateAsOther(change func(ds *appsv1.DaemonSet) string) {
	s.writeAsOther(change, func(ds *appsv1.DaemonSet) error {
		_, err := s.api.Update(ds)
		return err
	})
}

// replaceAsOther is someone else's delete of the DaemonSet and create of the
// changed copy (a new UID) in its place; change says what the copy is.
func (s *propSim) replaceAsOther(change func(ds *appsv1.DaemonSet) string) {
	replaced := func(ds *appsv1.DaemonSet) string { return "replaces the DaemonSet with " + change(ds) }
	s.writeAsOther(replaced, func(ds *appsv1.DaemonSet) error {
		if err := s.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName); err != nil {
			return err
		}
		ds.UID, ds.ResourceVersion, ds.Status = "", "", appsv1.DaemonSetStatus{}
		_, err := s.api.Create(ds)
		return err
	})
}

// writeAsOther is someone else's write of the DaemonSet, and its events:
// change edits a copy of the stored object and says, for the story, what it
// did ("" where the caller tells the story); write sends the copy to the
// server. With no DaemonSet it does nothing.
func (s *propSim) writeAsOther(change func(ds *appsv1.DaemonSet) string, write func(ds *appsv1.DaemonSet) error) {
	ds := s.stored()
	if ds == nil {
		return
	}
	ds = ds.DeepCopy()
	what := change(ds)
	s.must(write(ds))
	if what != "" {
		s.logf("someone else %s", what)
	}
	s.drainWatchAs(byOther)
}

// fightPeriod is how often the fighting writer changes the DaemonSet.
const fightPeriod = 2 * time.Second

// fight is a writer that keeps changing the DaemonSet's image, one change
// every fightPeriod of simulated time for rounds rounds; between two, every
// event is delivered and the controller runs to quiet (its streak timer
// included). The invariant: the controller's writes during the fight are
// at most the repairs the backoff allows in the simulated time it lasted.
func (s *propSim) fight(rounds int) {
	if s.stored() == nil {
		return
	}
	s.runThroughDoor() // what came before plays out first
	start, writes := s.clock.Now(), s.controllerWrites
	s.logf("someone else fights: %d changes, one every %s", rounds, fightPeriod)
	for i := range rounds {
		if len(s.violations) > 0 {
			return
		}
		if i > 0 {
			s.waitOnTimers(fightPeriod)
		}
		s.stimulus()
		s.updateAsOther(func(ds *appsv1.DaemonSet) string {
			ds.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("quay.io/someone/else:%d", i%2)
			return "" // told once, above
		})
		s.runToQuiet()
	}
	elapsed := s.clock.Now().Sub(start)
	if got, bound := s.controllerWrites-writes, DefaultRepairPolicy().Bound(elapsed); got > bound {
		s.violate("fight-writes", fmt.Sprintf("%d controller writes in a fight of %d changes over %s; the repair budget allows %d", got, rounds, elapsed, bound))
	}
}

// fightRoundsToDeclare is a fight long enough for the controller to declare
// it: fightMinRepairs repairs spanning fightMinSpan, at fightPeriod.
const fightRoundsToDeclare = 17

// fightWithAFailedRepair is a fight the controller declares, then one more
// change whose repair's apply the API refuses: the repair is left to the
// retry, and the other writer stops. (The refusal lasts until a later step
// or the settling lifts it.)
func (s *propSim) fightWithAFailedRepair() {
	s.fight(fightRoundsToDeclare)
	if len(s.violations) > 0 || s.stored() == nil {
		return
	}
	s.setRefused("update", true)
	s.fight(1)
	for i := 0; i < 10 && !s.c.core.RetryPending() && len(s.violations) == 0 && s.timerDue(); i++ {
		s.runToQuiet()
	}
}

// writeImageAs changes the DaemonSet's image as manager, which
// managedFields then names (one entry per manager, as the API server keeps).
func (s *propSim) writeImageAs(manager, image string) {
	s.updateAsOther(func(ds *appsv1.DaemonSet) string {
		ds.Spec.Template.Spec.Containers[0].Image = image
		at := metav1.NewTime(s.clock.Now().Truncate(time.Second)) // the API server keeps seconds
		ds.ManagedFields = slices.DeleteFunc(ds.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == manager })
		ds.ManagedFields = append(ds.ManagedFields, templateEntry(manager, at))
		return "" // the writers' actors tell their writes
	})
}

// templateEntry is the managedFields entry of manager's update of the pod
// template at at.
func templateEntry(manager string, at metav1.Time) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
		Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{}}}`)}}
}

// burstAfterOtherEdits is another writer's first burst after a user's
// edits: one client changes the image three times, 100 ms apart, and 5 s
// later another client changes it 10 times, 100 ms apart. The burst's last
// change must be undone within the repair gate's Settle of the burst's end,
// or, when that needs more than the budget holds, once it holds it.
// The API answers throughout (refusals are lifted first).
func (s *propSim) burstAfterOtherEdits() {
	if s.stored() == nil || s.cfg.disabled || s.c.holding() {
		return // nothing the controller repairs
	}
	for _, v := range []string{"create", "update", "delete"} {
		s.setRefused(v, false) // the bound is the gate's: the API answers
	}
	s.runThroughDoor()
	s.bursts++
	writer, burster := fmt.Sprintf("kubectl-set-%d", s.bursts), fmt.Sprintf("kubectl-patch-%d", s.bursts)
	step := s.writeAndRun
	s.logf("%s changes the image 3 times, 100ms apart", writer)
	for i := range 3 {
		step(100*time.Millisecond, writer, fmt.Sprintf("quay.io/someone/set:%d", i))
	}
	s.logf("5s later, %s changes the image 10 times, 100ms apart", burster)
	p := DefaultRepairPolicy()
	// A writer the gate has room to keep apart (fewer than MaxNamedWriters
	// named, and no record of the other writers, where a new name counts
	// while it lasts), with room in the budget, has its first change undone
	// at once.
	named, others := 0, false
	for _, w := range s.c.core.Log().Writers() {
		switch w.Name {
		case core.OtherWriters:
			others = true
		case core.Unnamed:
		default:
			named++
		}
	}
	s.waitOnTimers(5 * time.Second) // what the gate made meanwhile is not the burst's repair
	writes := s.controllerWrites
	room := named < core.MaxNamedWriters && !others && p.Available(s.c.core.Log(), s.clock.Now()) >= 1
	step(0, burster, "quay.io/someone/patch:0")
	if room && s.controllerWrites == writes {
		s.violate("first-edit-waits", fmt.Sprintf("%s's first change waited, with room in the repair budget (%s)", burster, s.c.backoffNote()))
	}
	for i := 1; i < 10; i++ {
		step(100*time.Millisecond, burster, fmt.Sprintf("quay.io/someone/patch:%d", i))
	}
	end := s.clock.Now()
	bound := end.Add(p.Settle)
	if b := p.BudgetAllows(s.c.core.Log(), 1); b.After(bound) {
		bound = b
	}
	for len(s.violations) == 0 && s.stored() != nil && strings.Contains(s.stored().Spec.Template.Spec.Containers[0].Image, "someone") {
		at, ok := s.c.core.Deadline()
		if !ok || at.After(bound) {
			s.violate("burst-repair-late", fmt.Sprintf("another writer's first burst was not undone within %s of its end (the loop's alarm: %v)", bound.Sub(end), at.Sub(end)))
			return
		}
		s.advanceTo(at, "the loop's alarm (its earliest deadline)")
		s.runToQuiet()
	}
}

// addExternally adds to the spec and keeps every annotation, as a patch
// does: a sidecar container, a toleration or a kube-rbac-proxy argument.
func (s *propSim) addExternally() { s.add(s.rng.IntN(3)) }

// add makes one of addition's changes, which, to the stored DaemonSet.
func (s *propSim) add(which int) {
	s.updateAsOther(func(ds *appsv1.DaemonSet) string { return "adds " + addition(ds, which) })
}

// addition adds one of three things to ds's pod template and names it.
func addition(ds *appsv1.DaemonSet, which int) string {
	pod := &ds.Spec.Template.Spec
	switch which {
	case 0:
		pod.Containers = append(pod.Containers, corev1.Container{Name: "sidecar", Image: "quay.io/someone/sidecar:latest",
			TerminationMessagePath: corev1.TerminationMessagePathDefault})
		return "a sidecar container"
	case 1:
		pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: "someone", Operator: corev1.TolerationOpExists})
		return "a toleration"
	default:
		for i := range pod.Containers {
			if pod.Containers[i].Name == resources.ContainerKubeRBACProxy {
				pod.Containers[i].Args = append(pod.Containers[i].Args, "--insecure-listen-address=0.0.0.0:8080")
			}
		}
		return "an argument of kube-rbac-proxy"
	}
}

// replaceExternally deletes the DaemonSet and creates it again (a new UID)
// with the same metadata and an extra toleration.
func (s *propSim) replaceExternally() {
	s.replaceAsOther(func(ds *appsv1.DaemonSet) string {
		addition(ds, 1)
		return "a copy that has a toleration more"
	})
}

// replaceWithAnotherSelector deletes the DaemonSet and creates one of the
// same name whose selector and labels are someone else's (`oc replace
// --force`, a GitOps prune and create): no update can make it the
// controller's, as spec.selector is immutable.
func (s *propSim) replaceWithAnotherSelector() {
	s.replaceAsOther(func(ds *appsv1.DaemonSet) string {
		theirs := map[string]string{"app": "someone-else"}
		ds.Labels = theirs
		ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: theirs}
		ds.Spec.Template.Labels = theirs
		return "one whose selector and labels are app=someone-else"
	})
}

// coalescedWriteAndLabelRemoval folds the controller's spec write and
// someone's removal of an owned label into one update: the version moves,
// the controller writes while the watch holds its events, its expectation of
// that write ends, someone removes a label at the write's generation, and the
// watch re-lists. The update the informer gets carries the controller's
// generation and someone else's metadata change.
func (s *propSim) coalescedWriteAndLabelRemoval() {
	if ds := s.stored(); ds == nil || missingOwnedLabel(ds) != "" {
		return
	}
	s.bumpVersion()
	writes := s.controllerWrites
	for range 20 {
		if s.controllerWrites != writes || len(s.violations) > 0 {
			break
		}
		if r := s.ready(); len(r) > 0 {
			s.dispatch(pick(r, first).wake)
		} else if !s.timerDue() {
			break
		}
	}
	if s.controllerWrites == writes || s.stored() == nil {
		return
	}
	s.expireExpectations()
	for r := s.ready(); len(r) > 0 && len(s.violations) == 0; r = s.ready() {
		s.dispatch(pick(r, first).wake)
	}
	s.removeLabel(resources.LabelManagedBy)
	s.relist()
}

// revertMetadata writes back the version annotation the controller applied
// before its latest one (a restore, a GitOps sync).
func (s *propSim) revertMetadata() {
	n := len(s.applied)
	if ds := s.stored(); ds == nil || n < 2 || ds.Annotations[resources.VersionAnnotation] != s.applied[n-1] {
		return
	}
	s.updateAsOther(func(ds *appsv1.DaemonSet) string {
		ds.Annotations[resources.VersionAnnotation] = s.applied[n-2]
		return "sets the version annotation back to " + s.applied[n-2]
	})
}

// holdPod makes one pod stay unavailable, or lets it become available.
func (s *propSim) holdPod() {
	s.held = 1 - s.held
	s.logf("world: %d pod(s) stay unavailable", s.held)
	s.rollOut()
}

// dropNode takes a node out of the desired count (tainted unreachable), or
// brings it back.
func (s *propSim) dropNode() {
	if s.nodes == simNodes {
		s.nodes--
	} else {
		s.nodes = simNodes
	}
	s.logf("world: %d node(s) should run a pod", s.nodes)
	s.rollOut()
}

// removeLabel is metadata drift: same UID, same generation.
func (s *propSim) removeLabel(key string) {
	s.removeOwned(func(ds *appsv1.DaemonSet) map[string]string { return ds.Labels }, "label", key)
}

// removeOwned is someone else's removal of an owned label or annotation
// (what), key of the map that of picks.
func (s *propSim) removeOwned(of func(*appsv1.DaemonSet) map[string]string, what, key string) {
	if ds := s.stored(); ds == nil || of(ds)[key] == "" {
		return
	}
	s.updateAsOther(func(ds *appsv1.DaemonSet) string {
		delete(of(ds), key)
		return "removes " + what + " " + key
	})
}

// removeCapability removes the manifest's capability annotation, which the
// apply enforces (issue 46, escape 2): its removal is drift like a label's.
func (s *propSim) removeCapability() {
	s.removeOwned(func(ds *appsv1.DaemonSet) map[string]string { return ds.Annotations }, "annotation", capabilityAnnotation)
}

// refusedDeleteThenEnabled: insights-config disables the runtime extractor
// and the API refuses the delete; a minute passes, in which the repair
// gate's deadline for a held repair comes while the level is disabled; then
// insights-config enables it again (issue 46, escape 4). The apply that
// follows undoes whatever change of someone else's is outstanding: a repair
// the gate decides.
func (s *propSim) refusedDeleteThenEnabled() {
	if s.stored() == nil || s.cfg.disabled || s.c.holding() || s.cfg.invalid {
		return
	}
	s.setRefused("delete", true)
	s.flipConfig()
	s.runThroughDoor()
	s.advanceTo(s.clock.Now().Add(DefaultRepairPolicy().Every), "a minute later")
	s.runToQuiet()
	s.flipConfig()
	s.runThroughDoor()
	s.setRefused("delete", false)
}

func (s *propSim) createExternally() {
	if s.stored() != nil {
		return
	}
	ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: "4.0.0"})
	s.must(err)
	ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
	_, err = s.api.Create(ds)
	s.must(err)
	s.logf("someone else creates a DaemonSet of the same name")
	s.drainWatchAs(byOther)
}

// rollOut plays the DaemonSet controller catching up with the current
// generation in its world: every node runs it, held pods unavailable.
func (s *propSim) rollOut() {
	ds := s.stored()
	if ds == nil || !s.statusBehind(ds) {
		return
	}
	ds = ds.DeepCopy()
	ds.Status = s.worldStatus(ds.Generation)
	s.updateStatus(ds, fmt.Sprintf("daemonset controller: generation %%d on %d node(s), %d unavailable", s.nodes, s.held))
}

// statusBehind: the DaemonSet controller has yet to report ds as its world is.
func (s *propSim) statusBehind(ds *appsv1.DaemonSet) bool {
	return ds.DeletionTimestamp == nil && !equality.Semantic.DeepEqual(ds.Status, s.worldStatus(ds.Generation))
}

// worldStatus is what the DaemonSet controller reports for generation gen
// once it has rolled it out on every node of its world.
func (s *propSim) worldStatus(gen int64) appsv1.DaemonSetStatus {
	return appsv1.DaemonSetStatus{
		ObservedGeneration: gen, DesiredNumberScheduled: s.nodes, CurrentNumberScheduled: s.nodes,
		UpdatedNumberScheduled: s.nodes, NumberAvailable: s.nodes - s.held, NumberReady: s.nodes - s.held,
		NumberUnavailable: s.held,
	}
}

// statusNoise is a status-only update: a pod becomes unavailable (dip) or a
// field unrelated to the rollout moves.
func (s *propSim) statusNoise(dip bool) {
	ds := s.stored()
	if ds == nil {
		return
	}
	ds = ds.DeepCopy()
	what := "daemonset controller: status-only update of generation %d (misscheduled count)"
	ds.Status.NumberMisscheduled = 1 - ds.Status.NumberMisscheduled
	if dip && ds.Status.NumberAvailable > 0 {
		what = "daemonset controller: a pod of generation %d becomes unavailable"
		ds.Status.NumberAvailable--
	}
	s.updateStatus(ds, what)
}

func (s *propSim) updateStatus(ds *appsv1.DaemonSet, format string) {
	s.writeStatus(ds)
	s.logf(format, ds.Generation)
	s.drainWatchAs(byDaemonSets)
}

// writeStatus stores ds (only its status differs from the server's) as the
// status subresource would: same spec and generation, a new resourceVersion.
func (s *propSim) writeStatus(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	s.statusSeq++
	ds.ResourceVersion = fmt.Sprintf("status-%d", s.statusSeq)
	s.must(s.api.Client.Tracker().Update(fakeapi.DaemonSets, ds, ds.Namespace))
	return ds
}

// writeAndRun changes the image as manager (see writeImageAs) after d of
// simulated time (the loop's alarm firing at each deadline as it comes due),
// and runs the controller until it is quiet.
func (s *propSim) writeAndRun(d time.Duration, manager, image string) {
	s.waitOnTimers(d)
	s.writeImageAs(manager, image)
	s.runToQuiet()
}

// burstAndPause is a writer that undoes the controller's repairs at 0, 1,
// 3, 7 and 15 s, then pauses 61 s (issue 33, defect 3): the rhythm that
// escaped a per-writer streak. Timers that come due on the way fire.
func (s *propSim) burstAndPause() {
	if s.stored() == nil {
		return
	}
	s.runThroughDoor()
	// Where the controller repairs freely (enabled, the API answering, the
	// whole budget left), the burst undoes at least 3 repairs: a fight,
	// reported through the pause.
	p := DefaultRepairPolicy()
	checked := !s.cfg.disabled && !s.c.holding() && p.Available(s.c.core.Log(), s.clock.Now()) == p.Burst
	if checked {
		for _, v := range []string{"create", "update", "delete"} {
			s.setRefused(v, false)
		}
	}
	s.logf("burster undoes repairs at 0, 1, 3, 7 and 15 s, then pauses 61 s")
	prev := time.Duration(0)
	for i, at := range []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second} {
		s.waitOnTimers(at - prev)
		prev = at
		s.writeAndRun(0, "burster", fmt.Sprintf("quay.io/someone/burst:%d", i))
	}
	s.waitOnTimers(61 * time.Second)
	if checked && len(s.violations) == 0 && !s.c.core.Fighting() {
		s.violate("burst-pause-unreported", "a writer that undid the repairs of its burst is not reported as a fight after its pause")
	}
}

// waitOnTimers lets d of simulated time pass, the loop's alarm firing as
// they come due.
func (s *propSim) waitOnTimers(d time.Duration) {
	end := s.clock.Now().Add(d)
	for len(s.violations) == 0 {
		at, ok := s.c.core.Deadline()
		if !ok || at.After(end) {
			break
		}
		s.advanceTo(at, "the loop's alarm (its earliest deadline)")
		s.runToQuiet()
	}
	s.advanceTo(end, d.String())
}

// churnNames is a writer with a new manager name on every write: five
// changes, one a second.
func (s *propSim) churnNames() {
	if s.stored() == nil {
		return
	}
	s.runThroughDoor()
	s.logf("a writer changes the image 5 times, one a second, with a new manager name each time")
	for range 5 {
		s.names++
		s.waitOnTimers(time.Second)
		s.writeAndRun(0, fmt.Sprintf("churn-%d", s.names), fmt.Sprintf("quay.io/someone/churn:%d", s.names))
	}
}

// manyNamesInOneDrain is one update whose managedFields names 8 new
// managers, as a client that writes managedFields itself can make it.
func (s *propSim) manyNamesInOneDrain() {
	s.updateAsOther(func(ds *appsv1.DaemonSet) string {
		s.names++
		ds.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("quay.io/someone/many:%d", s.names)
		at := metav1.NewTime(s.clock.Now().Truncate(time.Second))
		for i := range 8 {
			ds.ManagedFields = append(ds.ManagedFields, templateEntry(fmt.Sprintf("many-%d-%d", s.names, i), at))
		}
		return "changes the image, managedFields naming 8 new managers"
	})
}

// clearManagedFields is an update that changes the image and clears
// managedFields: the change names no one.
func (s *propSim) clearManagedFields() {
	s.updateAsOther(func(ds *appsv1.DaemonSet) string {
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/unnamed:latest"
		ds.ManagedFields = []metav1.ManagedFieldsEntry{}
		return "changes the image and clears managedFields"
	})
}

// periodicSync is a GitOps tool's periodic sync that undoes the repairs
// every 3 minutes, 4 times: by the 4th it has undone at least 3 repairs,
// and must be reported as a fight.
func (s *propSim) periodicSync() {
	s.syncing("a GitOps tool syncs its image every 3 minutes, 4 times", 3*time.Minute, 4,
		func(int) (string, string) { return "argocd-controller", "quay.io/gitops/extractor:synced" },
		"periodic-unreported", "a writer that undid 3 repairs, one every 3 minutes, is not reported as a fight")
}

// rotatingNames is a writer that escapes any one name's window (issue 46,
// escape 1): it writes its image every 7.6 minutes under 5 manager names in
// turn, so each name undoes a repair only every 38 minutes. After 11 writes
// (6 undos) it must be reported as a fight.
func (s *propSim) rotatingNames() {
	s.syncing("a writer syncs its image every 7.6 minutes under 5 names in turn, 11 times", 7*time.Minute+36*time.Second, 11,
		func(i int) (string, string) {
			return fmt.Sprintf("rotating-%d", i%5), fmt.Sprintf("quay.io/rotating/extractor:%d", i%2)
		},
		"rotation-unreported", "a writer that undid 6 repairs within an hour under 5 names in turn is not reported as a fight")
}

// syncing is a writer that writes the image every period, n times, its
// i-th write as write(i) says (manager, image), while the API answers; it
// must then be reported as a fight, else the violation kind says why.
func (s *propSim) syncing(what string, period time.Duration, n int, write func(i int) (string, string), kind, why string) {
	if s.stored() == nil || s.cfg.disabled || s.c.holding() {
		return
	}
	for _, v := range []string{"create", "update", "delete"} {
		s.setRefused(v, false)
	}
	s.runThroughDoor()
	s.logf("%s", what)
	for i := range n {
		if i > 0 {
			s.waitOnTimers(period)
		}
		manager, image := write(i)
		s.writeAndRun(0, manager, image)
	}
	if len(s.violations) == 0 && !s.c.core.Fighting() {
		s.violate(kind, why)
	}
}

// lostRepairResponse: someone changes the DaemonSet, and the controller's
// repair is made but its response is lost, so the controller cannot tell
// whether it wrote; its retry then finds nothing to change.
func (s *propSim) lostRepairResponse() {
	if s.stored() == nil {
		return
	}
	s.runThroughDoor()
	s.loseResponse = true
	s.add(0)
	s.runToQuiet()
	s.loseResponse = false // no repair was made: the next write answers
}

// racedVersionApply: the cluster version changes, and someone else changes
// the image just before the controller's update for it reaches the server
// (issue 46, escape 5). The update loses the race, and the read after it
// shows the other writer's change: writing the new version over it would
// undo that change outside the gate, uncounted. It is the gate's to repair
// when it reaches the loop as drift.
func (s *propSim) racedVersionApply() {
	if s.stored() == nil || s.cfg.disabled || s.c.holding() {
		return
	}
	s.runThroughDoor()
	s.raceNextUpdate = true
	s.bumpVersion()
	s.runToQuiet()
	s.raceNextUpdate = false // no update was made
}

// configRelisted: the config informer re-lists, as after any broken watch,
// and the host relays the unchanged insights-config: a notification that
// changes nothing.
func (s *propSim) configRelisted() {
	s.notifyConfig()
	s.logf("config: re-listed, unchanged")
	s.runToQuiet()
}

// staleRelistAfterCreate: someone deletes the DaemonSet and the controller
// creates it anew; before the create's event arrives, a re-list served by
// a lagging watch cache shows no DaemonSet, as the informer reports it
// (issue 33, defect 6). The list predates the create: it is no deletion.
func (s *propSim) staleRelistAfterCreate() {
	if s.stored() == nil || s.cfg.disabled || s.c.holding() {
		return
	}
	s.runThroughDoor()
	s.deleteExternally()
	s.deliver(len(s.inFlight))
	if r := s.ready(); len(r) > 0 && r[0].wake == wakeDrift {
		s.dispatch(wakeDrift) // the delete's repair, before anything else
	}
	if len(s.inFlight) == 0 || s.stored() == nil {
		return // no create in flight (refused, or not yet made)
	}
	s.logf("a re-list from a lagging watch cache shows no DaemonSet")
	queued := len(s.ri.queued)
	s.ri.reportAbsent("") // what relisted reports of a list without it
	s.noteObservations(queued, byController)
	s.runToQuiet()
}

// finalizerHeldReenable: someone's finalizer holds the DaemonSet;
// insights-config disables the runtime extractor, and enables it again
// while the deletion is held; then the finalizer goes (issue 33, defect 1).
// The settling that follows (no resync) must find a DaemonSet.
func (s *propSim) finalizerHeldReenable() {
	ds := s.stored()
	if ds == nil || s.cfg.disabled || s.c.holding() || s.cfg.invalid {
		return
	}
	s.setRefused("delete", false)
	s.runThroughDoor()
	if ds = s.stored(); ds == nil {
		return
	}
	ds = ds.DeepCopy()
	ds.Finalizers = []string{"example.com/hold"}
	_, err := s.api.Update(ds)
	s.must(err)
	s.logf("someone else adds a finalizer to the DaemonSet")
	s.drainWatchAs(byOther)
	s.foreignOutstanding = false // no field the controller owns: nothing to repair
	s.runToQuiet()
	s.flipConfig()
	s.runThroughDoor()
	s.flipConfig()
	s.runThroughDoor() // the enable is acted on during the hold
	held := s.stored()
	if held == nil {
		return
	}
	if held.DeletionTimestamp == nil { // not deleted after all: the finalizer goes
		held = held.DeepCopy()
		held.Finalizers = nil
		_, err := s.api.Update(held)
		s.must(err)
		s.drainWatchAs(byOther)
		return
	}
	s.must(s.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName))
	s.logf("the finalizer is removed: the DaemonSet the controller deleted goes")
	s.drainWatchAs(byController)
	s.runToQuiet()
}
