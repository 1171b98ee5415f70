package status

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// want is "Status Reason" of one condition, e.g. "True RollingOut".
type want struct{ available, progressing, degraded string }

func summary(c configv1.ClusterOperatorStatusCondition) string {
	return string(c.Status) + " " + c.Reason
}

func TestConditionsEveryStateAndCause(t *testing.T) {
	errForbidden := errors.New("forbidden")
	errConfig := errors.New("dataReporting.disableRuntimeExtractor: invalid value")
	conflict := &ConflictingWriter{Writers: []WriterCount{{Manager: "gitops", Repairs: 6}}, Repairs: 6, For: 32 * time.Second, RepairEvery: 32 * time.Second}

	// Per state, with a pod still to update and pods available: Available and
	// Progressing do not depend on the cause. Running reports the rollout too
	// (a node joined): a replica that starts now sees the same cluster.
	byState := map[fsm.State]struct {
		available, progressing string
		failReason             string // Degraded reason of a failing action in this state
	}{
		fsm.StateDisabled:  {"True Disabled", "False Disabled", ReasonDeleteFailed},
		fsm.StateDeploying: {"True RollingOut", "True RollingOut", ReasonApplyFailed},
		fsm.StateRunning:   {"True RollingOut", "True RollingOut", ReasonApplyFailed},
		fsm.StateUpgrading: {"True Upgrading", "True Upgrading", ReasonApplyFailed},
		fsm.StateDrifted:   {"True Restoring", "True Restoring", ReasonApplyFailed},
		fsm.StateDeleting:  {"True Deleting", "True Deleting", ReasonDeleteFailed},
	}
	causes := []struct {
		name     string
		apply    func(*Snapshot)
		degraded func(failReason string) string
	}{
		{"healthy", func(*Snapshot) {}, func(string) string { return "False AsExpected" }},
		{"action failing", func(s *Snapshot) {
			s.Failures, s.LastError, s.RetryIn, s.FailurePersists = 3, errForbidden, 4*time.Second, true
		},
			func(r string) string { return "True " + r }},
		{"action failing within the inertia", func(s *Snapshot) { s.Failures, s.LastError, s.RetryIn = 3, errForbidden, 4*time.Second },
			func(string) string { return "False AsExpected" }},
		{"config rejected", func(s *Snapshot) { s.ConfigError = errConfig },
			func(string) string { return "True InvalidConfig" }},
		{"action failing and config rejected", func(s *Snapshot) {
			s.Failures, s.LastError, s.ConfigError, s.FailurePersists = 1, errForbidden, errConfig, true
		},
			func(r string) string { return "True " + r }},
		{"failure count without an error", func(s *Snapshot) { s.Failures = 2 },
			func(string) string { return "False AsExpected" }},
		{"stale error after a success", func(s *Snapshot) { s.LastError = errForbidden },
			func(string) string { return "False AsExpected" }},
		{"conflicting writer", func(s *Snapshot) { s.Conflict = conflict },
			func(string) string { return "True ConflictingWriter" }},
		{"conflicting writer and rollout stuck", func(s *Snapshot) { s.Conflict, s.Stuck = conflict, &RolloutStuck{For: time.Hour, NotReady: 1} },
			func(string) string { return "True ConflictingWriter" }},
		{"conflicting writer and action failing", func(s *Snapshot) {
			s.Conflict, s.Failures, s.LastError, s.FailurePersists = conflict, 1, errForbidden, true
		},
			func(r string) string { return "True " + r }},
	}

	require.Len(t, byState, len(fsm.States()), "every state has expectations")
	for _, state := range fsm.States() {
		exp := byState[state]
		for _, cause := range causes {
			t.Run(string(state)+"/"+cause.name, func(t *testing.T) {
				s := Snapshot{State: state, Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", MaxUnavailable: 1, Desired: 3, Updated: 2, Available: 2}
				cause.apply(&s)
				assertConditions(t, s, want{exp.available, exp.progressing, cause.degraded(exp.failReason)})
			})
		}
	}
}

// Available turns False when no pod serves. While pods are still to update it
// names a failing action when there is one; once rolled out the pods are
// what is missing.
func TestConditionsNoPodAvailable(t *testing.T) {
	toUpdate := Snapshot{Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", MaxUnavailable: 1, Desired: 3}
	done := Snapshot{Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", MaxUnavailable: 1, RolledOut: true, Desired: 3, Updated: 3}
	cases := []struct {
		name    string
		state   fsm.State
		s       Snapshot
		failing bool
		want    want
	}{
		{"rolling out", fsm.StateDeploying, toUpdate, false, want{"False RollingOut", "True RollingOut", "False AsExpected"}},
		{"rolling out, failing", fsm.StateDeploying, toUpdate, true, want{"False ApplyFailed", "True RollingOut", "True ApplyFailed"}},
		{"upgrading", fsm.StateUpgrading, toUpdate, false, want{"False Upgrading", "True Upgrading", "False AsExpected"}},
		{"upgrading, failing", fsm.StateUpgrading, toUpdate, true, want{"False ApplyFailed", "True Upgrading", "True ApplyFailed"}},
		{"restoring", fsm.StateDrifted, toUpdate, false, want{"False Restoring", "True Restoring", "False AsExpected"}},
		{"restoring, failing", fsm.StateDrifted, toUpdate, true, want{"False ApplyFailed", "True Restoring", "True ApplyFailed"}},
		{"absent", fsm.StateDrifted, Snapshot{Version: "4.22.1"}, false, want{"False RollingOut", "True RollingOut", "False AsExpected"}},
		{"rolled out, no pod available", fsm.StateRunning, done, false, want{"False PodsUnavailable", "False AsExpected", "False AsExpected"}},
		{"rolled out, no pod available, failing", fsm.StateRunning, done, true, want{"False PodsUnavailable", "False AsExpected", "True ApplyFailed"}},
		// A DaemonSet that wants no pods (no node matches) is rolled out and serves all it should.
		{"rolled out on zero nodes", fsm.StateRunning, Snapshot{Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", RolledOut: true}, false,
			want{"True AsExpected", "False AsExpected", "False AsExpected"}},
		// Disabled and Deleting never had pods to offer; they stay Available.
		{"disabled", fsm.StateDisabled, Snapshot{}, true, want{"True Disabled", "False Disabled", "True DeleteFailed"}},
		{"deleting", fsm.StateDeleting, toUpdate, true, want{"True Deleting", "True Deleting", "True DeleteFailed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			s.State = c.state
			if c.failing {
				s.Failures, s.LastError, s.FailurePersists = 1, errors.New("forbidden"), true
			}
			assertConditions(t, s, c.want)
		})
	}
}

func assertConditions(t *testing.T, s Snapshot, w want) {
	t.Helper()
	got := Conditions(s)
	require.Len(t, got, 3)
	for i, typ := range ConditionTypes {
		assert.Equal(t, typ, got[i].Type)
		assert.Regexp(t, camelCase, got[i].Reason)
		assert.NotEmpty(t, got[i].Message)
		assert.True(t, got[i].LastTransitionTime.IsZero(), "Conditions leaves LastTransitionTime to the Reporter")
	}
	assert.Equal(t, w.available, summary(got[0]), "Available")
	assert.Equal(t, w.progressing, summary(got[1]), "Progressing")
	assert.Equal(t, w.degraded, summary(got[2]), "Degraded")
}

var camelCase = regexp.MustCompile(`^[A-Z][A-Za-z]*$`)

func TestConditionMessages(t *testing.T) {
	forbidden := errors.New(`daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update`)
	badConfig := errors.New("dataReporting.runtimeExtractor.nodeSelector: must be a map")

	// present is a DaemonSet at 4.22.1 with 3 nodes to run a pod.
	present := func(s Snapshot) Snapshot {
		if s.Version == "" {
			s.Version = "4.22.1"
		}
		s.Present, s.AppliedVersion, s.MaxUnavailable, s.Desired = true, "4.22.1", 1, 3
		s.RolledOut = s.Updated == 3
		return s
	}
	cases := []struct {
		name string
		s    Snapshot
		typ  configv1.ClusterStatusConditionType
		want string
	}{
		{"rollout progress", present(Snapshot{State: fsm.StateDeploying, Updated: 2, Available: 2}),
			ConditionProgressing, "rolling out 2/3 nodes to 4.22.1"},
		{"a node counts once it runs the current template", present(Snapshot{State: fsm.StateDeploying, Updated: 2, Available: 1}),
			ConditionProgressing, "rolling out 2/3 nodes to 4.22.1"},
		{"rollout without a known version", Snapshot{State: fsm.StateDeploying, Present: true, Desired: 3, Updated: 1, Available: 1, MaxUnavailable: -1},
			ConditionProgressing, "rolling out 1/3 nodes"},
		{"new spec not observed yet", Snapshot{State: fsm.StateDeploying, Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", Desired: 3, Updated: 3, Available: 3},
			ConditionProgressing, "rolling out to 4.22.1: waiting for the DaemonSet controller to observe the new spec"},
		{"upgrade progress", present(Snapshot{State: fsm.StateUpgrading, Updated: 1, Available: 3}),
			ConditionProgressing, "upgrading 1/3 nodes to 4.22.1"},
		{"available during an upgrade", present(Snapshot{State: fsm.StateUpgrading, Updated: 1, Available: 2}),
			ConditionAvailable, "runtime extractor is available on 2/3 nodes while upgrading 1/3 nodes to 4.22.1; 1 node has no available pod (within maxUnavailable 1)"},
		{"restore progress", present(Snapshot{State: fsm.StateDrifted}),
			ConditionProgressing, "restoring after an external change: rolling out 0/3 nodes to 4.22.1"},
		{"nothing available yet", present(Snapshot{State: fsm.StateDeploying}),
			ConditionAvailable, "no runtime extractor pod is available yet: rolling out 0/3 nodes to 4.22.1"},
		{"not deployed yet", Snapshot{State: fsm.StateDeploying, Version: "4.22.1"},
			ConditionProgressing, "deploying the runtime extractor at version 4.22.1: the DaemonSet does not exist yet"},
		{"running", present(Snapshot{State: fsm.StateRunning, Updated: 3, Available: 3}),
			ConditionAvailable, "runtime extractor is available on 3/3 nodes at version 4.22.1"},
		{"running, rolled out", present(Snapshot{State: fsm.StateRunning, Updated: 3, Available: 2}),
			ConditionProgressing, "runtime extractor is rolled out on 3/3 nodes at version 4.22.1"},
		{"running, more nodes without a pod than maxUnavailable", present(Snapshot{State: fsm.StateRunning, Updated: 3, Available: 1, UnavailableNodes: []string{"node-b", "node-c"}}),
			ConditionAvailable, "runtime extractor is available on 1/3 nodes at version 4.22.1; 2 nodes have no available pod (more than maxUnavailable 1): node-b, node-c"},
		{"running, nodes without a pod, pods list denied", present(Snapshot{State: fsm.StateRunning, Updated: 3, Available: 2, UnavailableNodesDenied: true}),
			ConditionAvailable, "runtime extractor is available on 2/3 nodes at version 4.22.1; 1 node has no available pod (within maxUnavailable 1); node names unavailable: pods list forbidden"},
		{"rollout stuck, no pod available", present(Snapshot{State: fsm.StateUpgrading, Updated: 0, Available: 0, Stuck: &RolloutStuck{For: 10 * time.Minute, NotReady: 3,
			Nodes: []string{"node-b"}, Warning: "FailedCreate: no PriorityClass with name missing-class was found"}}),
			ConditionDegraded, "rollout made no progress for 10m0s: 3 of 3 nodes not ready (node-b, ...); newest warning on the DaemonSet: FailedCreate: no PriorityClass with name missing-class was found"},
		{"rollout stuck, more nodes without a pod than maxUnavailable, lists denied", present(Snapshot{State: fsm.StateUpgrading, Updated: 1, Available: 1, Stuck: &RolloutStuck{For: 10 * time.Minute, NotReady: 2,
			Denied: []string{DeniedPodsList, DeniedEventsList}}}),
			ConditionDegraded, "rollout made no progress for 10m0s: 2 of 3 nodes not ready (node names unavailable: pods list forbidden); newest warning on the DaemonSet unavailable: events list forbidden"},
		{"rollout stuck on one node, within maxUnavailable: not Degraded", present(Snapshot{State: fsm.StateUpgrading, Updated: 1, Available: 2, Stuck: &RolloutStuck{For: 10 * time.Minute, NotReady: 2,
			Nodes: []string{"node-c"}, Denied: []string{DeniedEventsList}}}),
			ConditionDegraded, "no errors"},
		{"rollout stuck on one node, within maxUnavailable: in Progressing", present(Snapshot{State: fsm.StateUpgrading, Updated: 1, Available: 2, Stuck: &RolloutStuck{For: 10 * time.Minute, NotReady: 2,
			Nodes: []string{"node-c"}, Denied: []string{DeniedEventsList}}}),
			ConditionProgressing, "upgrading 1/3 nodes to 4.22.1; rollout made no progress for 10m0s: 2 of 3 nodes not ready (node-c, ...); newest warning on the DaemonSet unavailable: events list forbidden"},
		{"running, no maxUnavailable", Snapshot{State: fsm.StateRunning, Present: true, RolledOut: true, Desired: 3, Updated: 3, Available: 2, MaxUnavailable: -1},
			ConditionAvailable, "runtime extractor is available on 2/3 nodes; 1 node has no available pod"},
		{"disabled", Snapshot{State: fsm.StateDisabled},
			ConditionAvailable, "runtime extractor is disabled by insights-config"},
		{"deleting", Snapshot{State: fsm.StateDeleting},
			ConditionProgressing, "removing the runtime extractor: disabled by insights-config"},
		{"apply failing past the inertia", Snapshot{State: fsm.StateRunning, Failures: 4, LastError: forbidden, RetryIn: 8*time.Second + 123*time.Millisecond, FailurePersists: true},
			ConditionDegraded, `the last apply failed: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying with backoff`},
		{"first failure, in Progressing", present(Snapshot{State: fsm.StateRunning, Updated: 3, Available: 3, Failures: 1, LastError: forbidden, RetryIn: 5 * time.Millisecond}),
			ConditionProgressing, `runtime extractor is rolled out on 3/3 nodes at version 4.22.1; the last apply failed: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying with backoff`},
		{"first failure, not in Degraded", Snapshot{State: fsm.StateDeploying, Failures: 1, LastError: forbidden, RetryIn: 5 * time.Millisecond},
			ConditionDegraded, "no errors"},
		{"delete failing, no retry pending", Snapshot{State: fsm.StateDeleting, Failures: 2, LastError: forbidden, FailurePersists: true},
			ConditionDegraded, `the last delete failed: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying with backoff`},
		{"apply failing with no pod", present(Snapshot{State: fsm.StateDrifted, Failures: 2, LastError: forbidden, RetryIn: 2 * time.Second}),
			ConditionAvailable, `no runtime extractor pod is available: the last apply failed: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying with backoff`},
		{"config rejected", Snapshot{State: fsm.StateRunning, ConfigError: badConfig},
			ConditionDegraded, "insights-config rejected, keeping the last good config: dataReporting.runtimeExtractor.nodeSelector: must be a map"},
		{"failing and config rejected", Snapshot{State: fsm.StateRunning, Failures: 1, LastError: errors.New("timeout"), RetryIn: time.Second, ConfigError: badConfig, FailurePersists: true},
			ConditionDegraded, "the last apply failed: timeout; retrying with backoff; insights-config rejected, keeping the last good config: dataReporting.runtimeExtractor.nodeSelector: must be a map"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Conditions(c.s)
			found := v1helpers.FindStatusCondition(got, c.typ)
			require.NotNil(t, found)
			assert.Equal(t, c.want, found.Message)
		})
	}
}

func TestConditionsArePure(t *testing.T) {
	s := Snapshot{State: fsm.StateUpgrading, Version: "4.22.1", Desired: 3, Updated: 1, Available: 2, Failures: 1, LastError: errors.New("x")}
	assert.Equal(t, Conditions(s), Conditions(s))
}

// Before the first observation nothing is known: a host reading the status
// then must not publish a guess.
func TestConditionsBeforeTheFirstObservationAreUnknown(t *testing.T) {
	conds := Conditions(Snapshot{})
	require.Len(t, conds, len(ConditionTypes))
	for i, c := range conds {
		assert.Equal(t, ConditionTypes[i], c.Type)
		assert.Equal(t, configv1.ConditionUnknown, c.Status)
		assert.Equal(t, ReasonStarting, c.Reason)
	}
}

// rolledOut is the cluster of issue 18's report: every node runs the current
// template at the target version, and 7 of 1000 pods are not available.
func rolledOut(state fsm.State) Snapshot {
	return Snapshot{State: state, Version: "4.22.0", Present: true, AppliedVersion: "4.22.0", RolledOut: true,
		Desired: 1000, Updated: 1000, Available: 993, MaxUnavailable: 330, UnavailableNodes: []string{"node-1", "node-2", "node-3"}}
}

// Issue 18, defect 3: pods that stay unavailable on a rolled-out DaemonSet are
// reported as what they are (how many nodes, against maxUnavailable, which
// ones), and the rollout as done.
func TestConditionsReportUnavailablePodsWhenRolledOut(t *testing.T) {
	got := Conditions(rolledOut(fsm.StateRunning))
	assert.Equal(t, "True PodsUnavailable", summary(got[0]))
	assert.Equal(t, "runtime extractor is available on 993/1000 nodes at version 4.22.0; "+
		"7 nodes have no available pod (within maxUnavailable 330): node-1, node-2, node-3, ...", got[0].Message)
	assert.Equal(t, "False AsExpected", summary(got[1]))
	assert.Equal(t, "runtime extractor is rolled out on 1000/1000 nodes at version 4.22.0", got[1].Message)
	assert.Equal(t, "False AsExpected", summary(got[2]))
}

// Issue 18, defect 3: a replica that has run the whole history and one that
// starts now reach different states for the same cluster (Running against
// Deploying, Upgrading against Deploying, Drifted against Deploying), and
// must report the same conditions. Only a rollout with pods still to update
// is named after the state that started it.
func TestConditionsAreAFunctionOfTheCluster(t *testing.T) {
	denied := errors.New(`admission webhook "policy" denied the request`)
	failing := func(s Snapshot) Snapshot { s.Failures, s.LastError, s.RetryIn = 3, denied, 8*time.Second; return s }
	notApplied := func(s Snapshot) Snapshot {
		s.Version, s.Desired, s.Updated, s.Available, s.UnavailableNodes = "4.22.9", 4, 4, 4, nil
		s.AppliedVersion = "4.22.8"
		return s
	}
	absent := func(s Snapshot) Snapshot {
		return Snapshot{State: s.State, Version: s.Version, Failures: s.Failures, LastError: s.LastError, RetryIn: s.RetryIn}
	}
	clusters := []struct {
		name string
		of   func(fsm.State) Snapshot
	}{
		{"rolled out, pods unavailable", rolledOut},
		{"rolled out, every pod available", func(st fsm.State) Snapshot {
			s := rolledOut(st)
			s.Available, s.UnavailableNodes = 1000, nil
			return s
		}},
		{"rolled out, apply failing", func(st fsm.State) Snapshot { return failing(rolledOut(st)) }},
		{"upgrade refused", func(st fsm.State) Snapshot { return failing(notApplied(rolledOut(st))) }},
		{"absent, create failing", func(st fsm.State) Snapshot { return absent(failing(rolledOut(st))) }},
		{"absent", func(st fsm.State) Snapshot { return absent(rolledOut(st)) }},
	}
	for _, cl := range clusters {
		t.Run(cl.name, func(t *testing.T) {
			want := Conditions(cl.of(fsm.StateDeploying)) // a replica that starts now
			for _, st := range []fsm.State{fsm.StateRunning, fsm.StateUpgrading, fsm.StateDrifted} {
				assert.Equal(t, want, Conditions(cl.of(st)), "in %s", st)
			}
		})
	}
}

// Issue 18, defect 3: an upgrade the API server refused leaves the DaemonSet
// at its old version; nothing is being upgraded, and the messages say so.
func TestConditionsUpgradeNotApplied(t *testing.T) {
	s := Snapshot{State: fsm.StateUpgrading, Version: "4.22.9", Present: true, AppliedVersion: "4.22.8", RolledOut: true,
		Desired: 4, Updated: 4, Available: 4, MaxUnavailable: 2,
		Failures: 2, LastError: errors.New(`admission webhook "policy" denied the request`), RetryIn: 2 * time.Second}
	got := Conditions(s)
	assert.Equal(t, "True Upgrading", summary(got[0]))
	assert.Equal(t, "runtime extractor is available on 4/4 nodes while the upgrade to 4.22.9 is not applied: the DaemonSet is still at version 4.22.8", got[0].Message)
	assert.Equal(t, "True Upgrading", summary(got[1]))
	assert.Equal(t, `the upgrade to 4.22.9 is not applied: the DaemonSet is still at version 4.22.8; the last apply failed: admission webhook "policy" denied the request; retrying with backoff`, got[1].Message)
	assert.Equal(t, "False AsExpected", summary(got[2]), "a refusal within the inertia is not Degraded")
	s.FailurePersists = true
	assert.Equal(t, "True ApplyFailed", summary(Conditions(s)[2]))

	s.AppliedVersion, s.Failures, s.LastError = "", 0, nil
	assert.Equal(t, "the upgrade to 4.22.9 is not applied: the DaemonSet carries no version", Conditions(s)[1].Message)
}

// Issue 18, defect 4: while the controller holds on an invalid config (none
// good seen since it started) it reports holding and what is deployed, never
// "disabled by insights-config".
func TestConditionsWhileHolding(t *testing.T) {
	badConfig := errors.New("dataReporting.disableRuntimeExtractor: Invalid value")
	holding := func(s Snapshot) Snapshot {
		s.State, s.Holding, s.ConfigError, s.Version = fsm.StateDisabled, true, badConfig, "4.22.0"
		return s
	}
	cases := []struct {
		name                 string
		s                    Snapshot
		available, availMsg  string
		progressMsg          string
		degraded, degradeMsg string
	}{
		{"running DaemonSet", holding(Snapshot{Present: true, AppliedVersion: "4.21.0", RolledOut: true, Desired: 3, Updated: 3, Available: 3, MaxUnavailable: 1}),
			"True Holding", "runtime extractor is available on 3/3 nodes at version 4.21.0, left as it is until insights-config is valid",
			"holding: insights-config is invalid and no valid config has been seen since the controller started, so the DaemonSet is left as it is",
			"True InvalidConfig", "insights-config rejected, keeping the last good config: dataReporting.disableRuntimeExtractor: Invalid value"},
		{"some pods unavailable", holding(Snapshot{Present: true, AppliedVersion: "4.21.0", RolledOut: true, Desired: 3, Updated: 3, Available: 1, MaxUnavailable: 1}),
			"True Holding", "runtime extractor is available on 1/3 nodes at version 4.21.0, left as it is until insights-config is valid; 2 nodes have no available pod (more than maxUnavailable 1)",
			"holding: insights-config is invalid and no valid config has been seen since the controller started, so the DaemonSet is left as it is",
			"True InvalidConfig", ""},
		{"no pod available", holding(Snapshot{Present: true, AppliedVersion: "4.21.0", Desired: 3, MaxUnavailable: 1}),
			"False Holding", "runtime extractor is available on 0/3 nodes at version 4.21.0, left as it is until insights-config is valid; 3 nodes have no available pod (more than maxUnavailable 1)",
			"holding: insights-config is invalid and no valid config has been seen since the controller started, so the DaemonSet is left as it is",
			"True InvalidConfig", ""},
		{"wants no pods", holding(Snapshot{Present: true, RolledOut: true}),
			"True Holding", "runtime extractor is available on 0/0 nodes, left as it is until insights-config is valid",
			"holding: insights-config is invalid and no valid config has been seen since the controller started, so the DaemonSet is left as it is",
			"True InvalidConfig", ""},
		{"nothing deployed", holding(Snapshot{}),
			"False Holding", "no runtime extractor is deployed, and none will be until insights-config is valid",
			"holding: insights-config is invalid and no valid config has been seen since the controller started, so nothing is deployed",
			"True InvalidConfig", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Conditions(c.s)
			assert.Equal(t, c.available, summary(got[0]))
			assert.Equal(t, c.availMsg, got[0].Message)
			assert.Equal(t, "False Holding", summary(got[1]))
			assert.Equal(t, c.progressMsg, got[1].Message)
			assert.Equal(t, c.degraded, summary(got[2]))
			if c.degradeMsg != "" {
				assert.Equal(t, c.degradeMsg, got[2].Message)
			}
		})
	}
}

// Issue 18: a 700 KB invalid value in config.yaml reaches the rejection's
// error; the ClusterOperator gets its beginning and how much was cut.
func TestConditionsCapA700KBConfigError(t *testing.T) {
	huge := errors.New("dataReporting.runtimeExtractor.priorityClassName: Invalid value: \"" + strings.Repeat("é", 350<<10) + "\"")
	for _, s := range []Snapshot{
		{State: fsm.StateRunning, ConfigError: huge},
		{State: fsm.StateDisabled, Holding: true, ConfigError: huge},
		{State: fsm.StateDrifted, Failures: 1, LastError: huge, ConfigError: huge},
	} {
		for _, c := range Conditions(s) {
			if len(c.Message) > 1024 || !utf8.ValidString(c.Message) {
				t.Fatalf("%s message of %d bytes (valid UTF-8: %v), want at most 1024 bytes of valid UTF-8", c.Type, len(c.Message), utf8.ValidString(c.Message))
			}
		}
		degraded := Conditions(s)[2]
		if !strings.HasPrefix(degraded.Message, "insights-config rejected") && !strings.HasPrefix(degraded.Message, "apply failed once") ||
			!regexp.MustCompile(`\.\.\. \[\d+ bytes cut\]$`).MatchString(degraded.Message) {
			t.Errorf("Degraded message %q..., want its beginning and a marker of what was cut", degraded.Message[:80])
		}
	}
}

func TestCapMessage(t *testing.T) {
	assert.Equal(t, "short", CapMessage("short"))
	exact := strings.Repeat("x", MaxMessageBytes)
	assert.Equal(t, exact, CapMessage(exact), "a message of exactly the limit stays whole")

	long := strings.Repeat("x", MaxMessageBytes+1)
	got := CapMessage(long)
	assert.LessOrEqual(t, len(got), MaxMessageBytes)
	kept := strings.TrimRight(got[:strings.Index(got, " ... [")], "x")
	assert.Empty(t, kept)
	assert.Equal(t, fmt.Sprintf(" ... [%d bytes cut]", len(long)-strings.Index(got, " ... [")), got[strings.Index(got, " ... ["):],
		"the marker counts exactly the bytes cut")

	// Multi-byte runes at every offset: never split, never over the limit.
	for pad := range 4 {
		msg := strings.Repeat("a", pad) + strings.Repeat("€", 2000) // 3 bytes each
		got := CapMessage(msg)
		require.LessOrEqual(t, len(got), MaxMessageBytes)
		require.True(t, utf8.ValidString(got), "pad %d: cut inside a rune", pad)
		cut := strings.Index(got, " ... [")
		require.Equal(t, fmt.Sprintf(" ... [%d bytes cut]", len(msg)-cut), got[cut:])
		require.Greater(t, cut, MaxMessageBytes-40, "pad %d: keeps nearly all it may", pad)
	}
}

// The fight's message names each writer and the likely causes, with no
// counts; the snapshot compares equal while only its age and counts grow, so
// a fight does not cost a status write each repair.
func TestConditionsConflictingWriter(t *testing.T) {
	c := &ConflictingWriter{Writers: []WriterCount{{Manager: "gitops-fight", Repairs: 5}, {Manager: "kubectl-edit", Repairs: 1}}, Repairs: 6, For: 32 * time.Second, RepairEvery: 32 * time.Second}
	s := Snapshot{State: fsm.StateDrifted, Present: true, Desired: 3, Updated: 3, Available: 3, RolledOut: true, Conflict: c}
	d := v1helpers.FindStatusCondition(Conditions(s), ConditionDegraded)
	assert.Equal(t, "True ConflictingWriter", summary(*d))
	assert.NotContains(t, d.Message, "5", "no counts")
	assert.Equal(t, "6 undone repairs in 32s: gitops-fight (5), kubectl-edit (1)", c.Tally(), "the counts are the Event's")
	for _, part := range []string{"changes by gitops-fight, kubectl-edit;", "at most every 32s", "another copy of this controller", "GitOps", "managedFields"} {
		assert.Contains(t, d.Message, part)
	}
	older := *c
	older.For = 5 * time.Minute
	later := s
	later.Conflict = &older
	assert.True(t, s.Equal(later), "only the fight's age differs")
	more := older
	more.Repairs = 7
	more.Writers = []WriterCount{{Manager: "kubectl-edit", Repairs: 6}, {Manager: "gitops-fight", Repairs: 5}}
	later.Conflict = &more
	assert.True(t, s.Equal(later), "another repair by the same writers says nothing new")
	more.Writers = append(more.Writers, WriterCount{Manager: "helm", Repairs: 1})
	assert.False(t, s.Equal(later), "another writer is news")
	later.Conflict = nil
	assert.False(t, s.Equal(later), "the fight's end is news")
}

// A DELETE that returned is not an object gone: while a finalizer holds the
// DaemonSet, its pods run, and Available and Progressing say it is being
// deleted and name what it waits for, in Disabled as in Deleting.
func TestConditionsTerminatingDaemonSetNamesItsFinalizers(t *testing.T) {
	for _, state := range []fsm.State{fsm.StateDisabled, fsm.StateDeleting} {
		s := Snapshot{State: state, Terminating: true, Finalizers: []string{"example.com/backup"}}
		conds := Conditions(s)
		for _, c := range conds[:2] {
			assert.Equal(t, "True Deleting", summary(c), "%s in %s", c.Type, state)
			assert.Contains(t, c.Message, "waits for finalizer example.com/backup to be removed", "%s in %s", c.Type, state)
		}
		assert.Equal(t, "False AsExpected", summary(conds[2]))
		gone := s
		gone.Terminating, gone.Finalizers = false, nil
		assert.False(t, s.Equal(gone), "the object's end is news")
	}
	s := Snapshot{State: fsm.StateDisabled, Terminating: true, Finalizers: []string{"a", "b"}}
	assert.Contains(t, Conditions(s)[1].Message, "waits for finalizers a, b to be removed")
	assert.Equal(t, "False Disabled", summary(Conditions(Snapshot{State: fsm.StateDisabled})[1]))
}

// While the cluster TLS profile cannot be read, Available says so, and what
// kube-rbac-proxy gets meanwhile, without changing its status or reason; not
// while nothing is deployed on purpose.
func TestConditionsSayTheTLSProfileIsUnknown(t *testing.T) {
	const why = "the cluster TLS profile is unknown (apiservers.config.openshift.io \"cluster\" is forbidden); kube-rbac-proxy gets the Intermediate profile until it is read"
	known := Snapshot{State: fsm.StateRunning, Present: true, Desired: 2, Updated: 2, Available: 2, RolledOut: true}
	unknown := known
	unknown.TLSProfileUnknown = why
	assert.False(t, known.Equal(unknown), "the profile becoming unknown is news")
	got, was := Conditions(unknown), Conditions(known)
	assert.Equal(t, summary(was[0]), summary(got[0]))
	assert.Equal(t, was[0].Message+"; "+why, got[0].Message)
	assert.Equal(t, was[1:], got[1:], "Progressing and Degraded do not change")

	disabled := Snapshot{State: fsm.StateDisabled, TLSProfileUnknown: why}
	assert.NotContains(t, Conditions(disabled)[0].Message, "TLS profile")
}

// A repair the gate holds back for its budget is said in Available's
// message: whose change, why, and the time it will be made (not a countdown,
// so the message stays as it is while it waits).
func TestConditionsSayARepairWaitsForTheBudget(t *testing.T) {
	at := time.Date(2026, 12, 5, 13, 45, 2, 0, time.UTC)
	known := Snapshot{State: fsm.StateRunning, Present: true, Desired: 2, Updated: 2, Available: 2, RolledOut: true}
	waits := known
	waits.RepairWaits = &RepairWait{Writers: []string{"kubectl-patch"}, At: at}
	assert.False(t, known.Equal(waits), "a repair that starts to wait is news")
	got, was := Conditions(waits), Conditions(known)
	assert.Equal(t, was[0].Message+"; the change by kubectl-patch waits for its repair until 2026-12-05T13:45:02Z: the repair budget is spent", got[0].Message)
	assert.Equal(t, was[1:], got[1:], "Progressing and Degraded do not change")
	later := waits
	later.RepairWaits = &RepairWait{Writers: []string{"kubectl-patch"}, At: at}
	assert.True(t, waits.Equal(later), "the same wait is no news")

	deleting := Snapshot{State: fsm.StateDeleting, RepairWaits: waits.RepairWaits}
	assert.NotContains(t, Conditions(deleting)[0].Message, "waits for its repair")
}

// A retry that fails as the last one did changes no condition and compares
// equal, so it costs no status write; the failure persisting past the
// inertia is news.
func TestRetryThatFailsTheSameWayIsNoNews(t *testing.T) {
	s := Snapshot{State: fsm.StateRunning, Version: "4.22.1", Failures: 1, LastError: errors.New("forbidden"), RetryIn: 100 * time.Millisecond}
	next := s
	next.Failures, next.RetryIn = 2, 200*time.Millisecond
	assert.True(t, s.Equal(next))
	assert.Equal(t, Conditions(s), Conditions(next))
	next.FailurePersists = true
	assert.False(t, s.Equal(next))
	next.Failures, next.LastError = 0, nil
	assert.False(t, s.Equal(next), "the failure's end is news")
}
