// Package status reports the runtime extractor's state as conditions on a
// ClusterOperator, so a cluster admin can read what the controller is doing and why
// without reading its logs.
package status

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// The condition types this package owns on the ClusterOperator. No other condition
// is ever written.
const (
	ConditionAvailable   configv1.ClusterStatusConditionType = "RuntimeExtractorAvailable"
	ConditionProgressing configv1.ClusterStatusConditionType = "RuntimeExtractorProgressing"
	ConditionDegraded    configv1.ClusterStatusConditionType = "RuntimeExtractorDegraded"
)

// ConditionTypes lists the owned condition types in the order Conditions returns them.
var ConditionTypes = []configv1.ClusterStatusConditionType{ConditionAvailable, ConditionProgressing, ConditionDegraded}

// Condition reasons, CamelCase as the API conventions want them.
const (
	// ReasonAsExpected: nothing to report.
	ReasonAsExpected = "AsExpected"
	// ReasonDisabled: insights-config disables the runtime extractor and nothing is deployed.
	ReasonDisabled = "Disabled"
	// ReasonRollingOut: the DaemonSet was created or re-applied and is rolling out.
	ReasonRollingOut = "RollingOut"
	// ReasonUpgrading: a new release version is rolling out.
	ReasonUpgrading = "Upgrading"
	// ReasonRestoring: someone else changed or deleted the DaemonSet and it is being restored.
	ReasonRestoring = "Restoring"
	// ReasonDeleting: the DaemonSet is being removed because insights-config disables it.
	ReasonDeleting = "Deleting"
	// ReasonApplyFailed: applying the DaemonSet failed and is being retried.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonDeleteFailed: deleting the DaemonSet failed and is being retried.
	ReasonDeleteFailed = "DeleteFailed"
	// ReasonInvalidConfig: insights-config was rejected; the last good config stays in use.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonRolloutStuck: the rollout of the last applied generation made no
	// progress for the rollout deadline.
	ReasonRolloutStuck = "RolloutStuck"
	// ReasonStarting: the controller has not observed the cluster yet (its
	// caches are not synced), so all three conditions are Unknown.
	ReasonStarting = "Starting"
	// ReasonHolding: insights-config is invalid and no valid config has been
	// seen since the controller started, so it changes nothing.
	ReasonHolding = "Holding"
	// ReasonPodsUnavailable: the DaemonSet is rolled out, and some of the nodes
	// that should run a pod have no available one.
	ReasonPodsUnavailable = "PodsUnavailable"
	// ReasonConflictingWriter: another writer keeps undoing the controller's
	// repairs of the DaemonSet (a tug-of-war); repairs back off.
	ReasonConflictingWriter = "ConflictingWriter"
)

// The reads of the rollout diagnosis that RBAC may deny (the Insights
// Operator's RBAC as it ships denies both; docs/embedding.md): the pods of the
// DaemonSet name the nodes, its Events give the newest warning.
const (
	DeniedPodsList   = "pods list"
	DeniedEventsList = "events list"
)

// DegradedReasons are the reasons RuntimeExtractorDegraded=True can carry.
var DegradedReasons = []string{ReasonApplyFailed, ReasonDeleteFailed, ReasonConflictingWriter, ReasonRolloutStuck, ReasonInvalidConfig}

// RolloutStuck describes a rollout that made no progress for the deadline.
// It is "for a while" by construction (the deadline is its inertia), so
// Degraded reports it at once.
type RolloutStuck struct {
	// For is how long it has made no progress (at least the deadline).
	For time.Duration
	// NotReady counts the nodes that should run a pod but have none available.
	NotReady int32
	// Nodes names a few of them (those with a pod that is not ready).
	Nodes []string
	// Warning is the newest warning Event on the DaemonSet, e.g.
	// "FailedCreate: ..."; empty when there is none.
	Warning string
	// Denied names the reads of the diagnosis that RBAC forbids
	// (DeniedPodsList, DeniedEventsList): what they tell is missing, and
	// the message says so.
	Denied []string
}

func (r *RolloutStuck) message(s Snapshot) string {
	msg := fmt.Sprintf("rollout made no progress for %s: %d of %d nodes not ready", roundBackoff(r.For), r.NotReady, s.Desired)
	switch {
	case len(r.Nodes) > 0:
		msg += " (" + strings.Join(r.Nodes, ", ")
		if int(r.NotReady) > len(r.Nodes) {
			msg += ", ..."
		}
		msg += ")"
	case slices.Contains(r.Denied, DeniedPodsList):
		msg += " (node names unavailable: " + DeniedPodsList + " forbidden)"
	}
	switch {
	case r.Warning != "":
		msg += "; newest warning on the DaemonSet: " + r.Warning
	case slices.Contains(r.Denied, DeniedEventsList):
		msg += "; newest warning on the DaemonSet unavailable: " + DeniedEventsList + " forbidden"
	}
	return msg
}

func (r *RolloutStuck) equal(o *RolloutStuck) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.NotReady == o.NotReady && slices.Equal(r.Nodes, o.Nodes) && r.Warning == o.Warning && slices.Equal(r.Denied, o.Denied)
}

// ConflictingWriter describes a tug-of-war over the DaemonSet: writers other
// than the controller that keep undoing its repairs.
type ConflictingWriter struct {
	// Writers name those whose changes the controller repaired during the
	// fight, most repairs first, at most a few.
	Writers []WriterCount
	// Repairs counts the controller's repairs since the fight's first one.
	Repairs int
	// For is the time since the fight's first repair.
	For time.Duration
	// RepairEvery is the wait between two repairs now (the repair backoff).
	RepairEvery time.Duration
}

// WriterCount is one writer of a fight: its field manager, or a description
// when managedFields names no one, and how many of its changes were repaired.
type WriterCount struct {
	Manager string
	Repairs int
}

// message names the writers, not how often each undid a repair nor for how
// long: those grow during the fight, and the Warning Events and the metrics
// carry them. ConflictingWriter is "for a while" by construction (the verdict
// takes several undos by one writer), so it needs no inertia of its own.
func (w *ConflictingWriter) message() string {
	return fmt.Sprintf("another writer keeps undoing the controller's repairs of the DaemonSet: changes by %s; "+
		"repairs now come at most every %s. Likely another copy of this controller with another manifest "+
		"(e.g. an operator that embeds it running next to the standalone binary) or a GitOps tool that applies its own "+
		"version of the DaemonSet: find the writer in the DaemonSet's metadata.managedFields and stop one of the two",
		strings.Join(w.managers(), ", "), roundBackoff(w.RepairEvery))
}

// Tally is what the message leaves out, for the Warning Event that reports
// the fight, e.g. "6 undone repairs in 32s: gitops-fight (5), kubectl-edit (1)".
func (w *ConflictingWriter) Tally() string {
	names := make([]string, 0, len(w.Writers))
	for _, wc := range w.Writers {
		names = append(names, fmt.Sprintf("%s (%d)", wc.Manager, wc.Repairs))
	}
	return fmt.Sprintf("%d undone repairs in %s: %s", w.Repairs, roundBackoff(w.For), strings.Join(names, ", "))
}

// managers are the writers' names, sorted.
func (w *ConflictingWriter) managers() []string {
	names := make([]string, 0, len(w.Writers))
	for _, wc := range w.Writers {
		names = append(names, wc.Manager)
	}
	slices.Sort(names)
	return names
}

// equal compares what the message says: For and the counts grow by
// themselves, and a status write for each repair of a fight would be a fight
// of its own.
func (w *ConflictingWriter) equal(o *ConflictingWriter) bool {
	if w == nil || o == nil {
		return w == o
	}
	return w.RepairEvery == o.RepairEvery && slices.Equal(w.managers(), o.managers())
}

// Snapshot is what the controller knows at one moment, the only input of Conditions.
type Snapshot struct {
	// State is the state machine's current state.
	State fsm.State
	// Version is the target release version ("" when unknown).
	Version string
	// Desired, Updated and Available are the DaemonSet's status counts
	// (desiredNumberScheduled, updatedNumberScheduled, numberAvailable); 0 when absent.
	Desired, Updated, Available int32
	// Failures counts consecutive failed actions; 0 once one succeeds.
	// No condition shows it (the Warning Events and the metrics do), and
	// Equal leaves it out, so a retry that fails as the last one did changes
	// no status.
	Failures int
	// LastError is the last action error, nil when healthy.
	LastError error
	// RetryIn is the backoff before the next retry, 0 when none is pending.
	// Like Failures, no condition shows it and Equal leaves it out.
	RetryIn time.Duration
	// FailurePersists: the failing action (LastError) has failed for the
	// Degraded inertia, or failed in a way no retry can fix. Only then is
	// RuntimeExtractorDegraded True for it; before, Progressing says it.
	FailurePersists bool
	// ConfigError is why insights-config was rejected (the last good config is kept);
	// nil when the current config is good.
	ConfigError error
	// Stuck is set while the rollout made no progress for the rollout deadline.
	Stuck *RolloutStuck
	// Conflict is set while another writer keeps undoing the controller's
	// repairs (a tug-of-war).
	Conflict *ConflictingWriter

	// Holding: insights-config is invalid and this process has seen no good
	// config since it started, so it changes nothing (State stays as it began).
	Holding bool
	// Present: the DaemonSet exists (the controller's cached view of it).
	Present bool
	// AppliedVersion is the version the DaemonSet carries in its metadata
	// (the version annotation); "" when absent or unannotated.
	AppliedVersion string
	// RolledOut: the DaemonSet controller observed the current generation and
	// every node that should run a pod runs one of the current template
	// (resources.Rollout.Complete). Availability is not part of it.
	RolledOut bool
	// MaxUnavailable is the DaemonSet's maxUnavailable resolved against
	// Desired as the DaemonSet controller resolves it; -1 when it has none
	// (OnDelete, or a value that does not resolve).
	MaxUnavailable int32
	// UnavailableNodes names a few nodes (sorted) whose pod is not ready, read
	// once the unavailable count of a rolled-out DaemonSet has settled; nil
	// when not read (yet), when the read failed, or when none.
	UnavailableNodes []string
	// UnavailableNodesDenied: those nodes cannot be named, as RBAC forbids
	// listing pods (DeniedPodsList).
	UnavailableNodesDenied bool
	// Terminating: the DaemonSet the cluster shows is being deleted (it has
	// a deletionTimestamp); Finalizers are what its deletion waits for.
	Terminating bool
	Finalizers  []string
	// TLSProfileUnknown says, while the cluster TLS profile cannot be read,
	// why and what kube-rbac-proxy gets meanwhile; "" when it is known.
	TLSProfileUnknown string
}

// Equal reports whether s and o say the same (errors compare by message).
// Failures and RetryIn, which change with every retry and which no condition
// shows, are left out.
func (s Snapshot) Equal(o Snapshot) bool {
	return s.State == o.State && s.Version == o.Version &&
		s.Desired == o.Desired && s.Updated == o.Updated && s.Available == o.Available &&
		failing(s) == failing(o) && s.FailurePersists == o.FailurePersists &&
		errorText(s.LastError) == errorText(o.LastError) && errorText(s.ConfigError) == errorText(o.ConfigError) &&
		s.Stuck.equal(o.Stuck) && s.Conflict.equal(o.Conflict) &&
		s.Holding == o.Holding && s.Present == o.Present && s.AppliedVersion == o.AppliedVersion &&
		s.RolledOut == o.RolledOut && s.MaxUnavailable == o.MaxUnavailable && slices.Equal(s.UnavailableNodes, o.UnavailableNodes) &&
		s.UnavailableNodesDenied == o.UnavailableNodesDenied && s.Terminating == o.Terminating && slices.Equal(s.Finalizers, o.Finalizers) &&
		s.TLSProfileUnknown == o.TLSProfileUnknown
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Conditions derives the three RuntimeExtractor* conditions from s, in the order of
// ConditionTypes. The zero Snapshot (no State: nothing observed yet) gives all
// three Unknown [Starting]. It is pure: LastTransitionTime is left zero for the
// Reporter to set. Every message is capped (CapMessage).
//
// Available and Progressing (status and reason; "pods>0" means True when a pod
// is available or none is wanted, else False):
//
//	situation                                  Available               Progressing
//	holding (invalid config since the start)   pods>0 Holding [1]      False Holding
//	Disabled                                   True   Disabled         False Disabled
//	Deleting                                   True   Deleting         True  Deleting
//	Disabled or Deleting, DaemonSet terminating True  Deleting [4]     True  Deleting [4]
//	enabled [2], DaemonSet terminating         pods>0 RollingOut [4]  True  RollingOut [4]
//	enabled [2], DaemonSet absent              False  RollingOut       True  RollingOut
//	enabled, not at the target version         pods>0 Upgrading        True  Upgrading
//	enabled, rolled out, every pod available   True   AsExpected       False AsExpected
//	enabled, rolled out, pods unavailable      pods>0 PodsUnavailable  False AsExpected
//	enabled, pods still to update              pods>0 by state [3]     True  by state [3]
//
// [1] False when nothing is deployed. [2] Deploying, Running, Upgrading,
// Drifted: which of them the machine is in depends on the controller's history
// (a replica that starts now is in Deploying where a long-running one is in
// Running, Upgrading or Drifted), so the conditions follow the cluster instead:
// the DaemonSet's presence, its version annotation, whether it is rolled out
// (resources.Rollout.Complete) and its pod counts. [3] Only a rollout with pods
// still to update is named after the state that started it: RollingOut
// (Deploying, Running), Upgrading, Restoring (Drifted). In the rows that are
// not rolled out, when no pod is available and an action is failing,
// Available=False names the failure (ApplyFailed) instead. [4] The DELETE
// returned, but the object, and its pods, are still there: the message names
// the finalizers its deletion waits for, until it is gone.
//
// Disabled is a healthy state the admin asked for, so it is Available, not
// Progressing and not Degraded. Deleting converges on it, so it stays Available
// while it makes progress.
//
// While an action fails (Failures >= 1 with a LastError), Progressing's
// message ends with the failure, and Degraded says it only once it persists
// (FailurePersists): the ClusterOperator contract wants Degraded for a state
// that lasts, not for one blip that the next retry clears. No message counts
// the failures or the time to the next retry, so a retry that fails the same
// way writes nothing.
//
// Degraded does not depend on the state: True [ApplyFailed, or DeleteFailed in
// Disabled and Deleting] while a failure persists, else True [ConflictingWriter] while another writer keeps undoing the
// controller's repairs, else True [RolloutStuck] while a rollout with pods still to update made no
// progress for the rollout deadline, else True [InvalidConfig] when
// insights-config was rejected, else False [AsExpected]. A failing action and
// a rejected config together report the action's reason and both messages.
//
// While the cluster TLS profile is unknown (TLSProfileUnknown), Available's
// message ends with why and what kube-rbac-proxy gets meanwhile, unless the
// runtime extractor is being removed or is disabled.
func Conditions(s Snapshot) []configv1.ClusterOperatorStatusCondition {
	if s.State == "" {
		return starting()
	}
	out := []configv1.ClusterOperatorStatusCondition{available(s), progressing(s), degraded(s)}
	if s.TLSProfileUnknown != "" && !removing(s) {
		out[0].Message += "; " + s.TLSProfileUnknown
	}
	if failing(s) {
		out[1].Message += "; " + failureMessage(s)
	}
	for i := range out {
		out[i].Message = CapMessage(out[i].Message)
	}
	return out
}

// starting is what is known before the first observation: nothing.
func starting() []configv1.ClusterOperatorStatusCondition {
	out := make([]configv1.ClusterOperatorStatusCondition, 0, len(ConditionTypes))
	for _, t := range ConditionTypes {
		out = append(out, configv1.ClusterOperatorStatusCondition{Type: t, Status: configv1.ConditionUnknown, Reason: ReasonStarting,
			Message: "the runtime extractor controller has not observed the cluster yet"})
	}
	return out
}

func available(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionAvailable, Status: configv1.ConditionTrue}
	switch {
	case s.Holding:
		c.Reason = ReasonHolding
		if !s.Present {
			c.Status, c.Message = configv1.ConditionFalse, "no runtime extractor is deployed, and none will be until insights-config is valid"
			break
		}
		if !servesPods(s) {
			c.Status = configv1.ConditionFalse
		}
		c.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes%s, left as it is until insights-config is valid",
			s.Available, s.Desired, atVersion(s.AppliedVersion)) + unavailableMessage(s)
	case removing(s) && s.Terminating:
		c.Reason, c.Message = ReasonDeleting, terminatingMessage(s)
	case s.State == fsm.StateDisabled:
		c.Reason, c.Message = ReasonDisabled, disabledMessage
	case s.State == fsm.StateDeleting:
		c.Reason, c.Message = ReasonDeleting, "runtime extractor is being removed as insights-config disables it"
	default:
		r := rolloutOf(s)
		c.Reason = r.reason
		if !r.progressing { // rolled out: only the pods can be missing
			if s.Available < s.Desired {
				c.Reason = ReasonPodsUnavailable
			}
			if !servesPods(s) {
				c.Status = configv1.ConditionFalse
			}
			c.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes%s", s.Available, s.Desired, atVersion(s.AppliedVersion)) +
				unavailableMessage(s)
			break
		}
		if s.Present && servesPods(s) {
			c.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes while %s", s.Available, s.Desired, r.message) +
				unavailableMessage(s)
			break
		}
		c.Status = configv1.ConditionFalse
		c.Message = "no runtime extractor pod is available yet: " + r.message
		if failing(s) {
			c.Reason = failureReason(s.State)
			c.Message = "no runtime extractor pod is available: " + failureMessage(s)
		}
	}
	return c
}

func progressing(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionProgressing, Status: configv1.ConditionTrue}
	switch {
	case s.Holding:
		c.Status, c.Reason = configv1.ConditionFalse, ReasonHolding
		c.Message = "holding: insights-config is invalid and no valid config has been seen since the controller started, so "
		if s.Present {
			c.Message += "the DaemonSet is left as it is"
		} else {
			c.Message += "nothing is deployed"
		}
	case removing(s) && s.Terminating:
		c.Reason, c.Message = ReasonDeleting, terminatingMessage(s)
	case s.State == fsm.StateDisabled:
		c.Status, c.Reason, c.Message = configv1.ConditionFalse, ReasonDisabled, disabledMessage
	case s.State == fsm.StateDeleting:
		c.Reason, c.Message = ReasonDeleting, "removing the runtime extractor: disabled by insights-config"
	default:
		r := rolloutOf(s)
		c.Reason, c.Message = r.reason, r.message
		if !r.progressing {
			c.Status = configv1.ConditionFalse
		}
	}
	return c
}

// removing: the state wants no DaemonSet.
func removing(s Snapshot) bool { return s.State == fsm.StateDisabled || s.State == fsm.StateDeleting }

// terminatingMessage says that the DaemonSet is being deleted and what its
// deletion waits for: a DELETE that returned is not an object gone.
func terminatingMessage(s Snapshot) string {
	msg := "removing the runtime extractor, as insights-config disables it: the DaemonSet is being deleted"
	if len(s.Finalizers) == 0 {
		return msg + "; its pods run until it is gone"
	}
	return msg + waitsFor(s) + "; its pods run until then"
}

// waitsFor names the finalizers the DaemonSet's deletion waits for, "" when
// none.
func waitsFor(s Snapshot) string {
	if len(s.Finalizers) == 0 {
		return ""
	}
	return fmt.Sprintf(" and waits for %s %s to be removed",
		map[bool]string{true: "finalizer", false: "finalizers"}[len(s.Finalizers) == 1], strings.Join(s.Finalizers, ", "))
}

// rollout is what the cluster says of an enabled runtime extractor: whether
// something is still to be rolled out, the reason Progressing and Available
// share, and Progressing's message.
type rollout struct {
	progressing     bool
	reason, message string
}

// rolloutOf reads the enabled states from the cluster, so that a replica that
// starts now and one that has run all along say the same. Only a rollout with
// pods still to update takes its reason from the state, which alone knows
// what started it.
func rolloutOf(s Snapshot) rollout {
	switch {
	case s.Terminating: // deleted before insights-config enabled it again
		return rollout{true, ReasonRollingOut, "the DaemonSet is being deleted" + waitsFor(s) +
			"; it is created anew once it is gone"}
	case !s.Present:
		msg := "deploying the runtime extractor: the DaemonSet does not exist yet"
		if s.Version != "" {
			msg = "deploying the runtime extractor at version " + s.Version + ": the DaemonSet does not exist yet"
		}
		return rollout{true, ReasonRollingOut, msg}
	case s.Version != "" && s.AppliedVersion != s.Version:
		// A refused upgrade, or one the cache does not show yet: no pod is
		// being upgraded.
		msg := "the upgrade to " + s.Version + " is not applied: the DaemonSet "
		if s.AppliedVersion == "" {
			msg += "carries no version"
		} else {
			msg += "is still at version " + s.AppliedVersion
		}
		return rollout{true, ReasonUpgrading, msg}
	case s.RolledOut:
		return rollout{false, ReasonAsExpected,
			fmt.Sprintf("runtime extractor is rolled out on %d/%d nodes%s", s.Updated, s.Desired, atVersion(s.AppliedVersion))}
	default:
		return rollout{true, rolloutReason(s.State), progressMessage(s)}
	}
}

// servesPods: a pod is available, or the DaemonSet wants none.
func servesPods(s Snapshot) bool { return s.Available > 0 || s.Desired == 0 }

// unavailableMessage names how many nodes that should run a pod have no
// available one, against maxUnavailable, and a few of them, e.g. "; 7 nodes
// have no available pod (within maxUnavailable 330): node-1, node-2, ...".
// It is empty when every such node has one.
func unavailableMessage(s Snapshot) string {
	n := s.Desired - s.Available
	if n <= 0 {
		return ""
	}
	msg := fmt.Sprintf("; %d nodes have no available pod", n)
	if n == 1 {
		msg = "; 1 node has no available pod"
	}
	switch {
	case s.MaxUnavailable < 0:
	case n <= s.MaxUnavailable:
		msg += fmt.Sprintf(" (within maxUnavailable %d)", s.MaxUnavailable)
	default:
		msg += fmt.Sprintf(" (more than maxUnavailable %d)", s.MaxUnavailable)
	}
	switch {
	case len(s.UnavailableNodes) > 0:
		msg += ": " + strings.Join(s.UnavailableNodes, ", ")
		if int(n) > len(s.UnavailableNodes) {
			msg += ", ..."
		}
	case s.UnavailableNodesDenied:
		msg += "; node names unavailable: " + DeniedPodsList + " forbidden"
	}
	return msg
}

func degraded(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionDegraded, Status: configv1.ConditionTrue}
	switch {
	case failing(s) && s.FailurePersists:
		c.Reason, c.Message = failureReason(s.State), failureMessage(s)
	case s.Conflict != nil:
		// Before RolloutStuck: each of the other writer's changes starts a
		// rollout of its own, so the fight is the cause of a stuck one.
		c.Reason, c.Message = ReasonConflictingWriter, s.Conflict.message()
	case s.Stuck != nil:
		c.Reason, c.Message = ReasonRolloutStuck, s.Stuck.message(s)
	case s.ConfigError != nil:
		c.Reason, c.Message = ReasonInvalidConfig, configMessage(s.ConfigError)
		return c
	default:
		c.Status, c.Reason, c.Message = configv1.ConditionFalse, ReasonAsExpected, "no errors"
		return c
	}
	// A rejected config under a reason that takes precedence is still said.
	if s.ConfigError != nil {
		c.Message += "; " + configMessage(s.ConfigError)
	}
	return c
}

const disabledMessage = "runtime extractor is disabled by insights-config"

// MaxMessageBytes bounds a condition or Event message: an error can quote
// whatever insights-config holds (hundreds of kilobytes), and the
// ClusterOperator and the Event should carry the gist, not the whole.
const MaxMessageBytes = 1024

// CapMessage returns msg when it fits in MaxMessageBytes, else its beginning,
// cut on a UTF-8 boundary, and a marker saying how many bytes were cut, all
// within MaxMessageBytes. Conditions and the controller's Events both use it.
func CapMessage(msg string) string {
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	// The marker for len(msg) is at least as long as the one for the bytes
	// actually cut, so reserving its length keeps the result within bounds.
	keep := MaxMessageBytes - len(cutMarker(len(msg)))
	for keep > 0 && !utf8.RuneStart(msg[keep]) {
		keep--
	}
	return msg[:keep] + cutMarker(len(msg)-keep)
}

func cutMarker(n int) string { return fmt.Sprintf(" ... [%d bytes cut]", n) }

// rolloutReason names a rollout with pods still to update after the state
// that started it.
func rolloutReason(s fsm.State) string {
	switch s {
	case fsm.StateUpgrading:
		return ReasonUpgrading
	case fsm.StateDrifted:
		return ReasonRestoring
	default:
		return ReasonRollingOut
	}
}

// progressMessage describes a rollout with pods still to update, e.g.
// "rolling out 2/3 nodes to 4.22.1": the nodes that run a pod of the current
// template (available or not; Available reports that). Counts the DaemonSet
// controller made before it observed the current generation say nothing of
// it, so then the message says that it waits for that.
func progressMessage(s Snapshot) string {
	var verb string
	switch s.State {
	case fsm.StateUpgrading:
		verb = "upgrading"
	case fsm.StateDrifted:
		verb = "restoring after an external change: rolling out"
	default:
		verb = "rolling out"
	}
	to := ""
	if s.Version != "" {
		to = " to " + s.Version
	}
	if s.Updated >= s.Desired { // not RolledOut, so the generation is not observed yet
		return verb + to + ": waiting for the DaemonSet controller to observe the new spec"
	}
	return fmt.Sprintf("%s %d/%d nodes%s", verb, s.Updated, s.Desired, to)
}

func atVersion(v string) string {
	if v == "" {
		return ""
	}
	return " at version " + v
}

func failing(s Snapshot) bool { return s.Failures >= 1 && s.LastError != nil }

// failureReason names the action that failed: in the states that remove the
// DaemonSet the failing action is a delete, elsewhere an apply.
func failureReason(s fsm.State) string {
	if !s.Enabled() {
		return ReasonDeleteFailed
	}
	return ReasonApplyFailed
}

// failureMessage reads e.g. "the last apply failed: forbidden: ...;
// retrying with backoff". It names no count and no delay: those change with
// every retry, and the Warning Event and the metrics carry them.
func failureMessage(s Snapshot) string {
	action := "apply"
	if failureReason(s.State) == ReasonDeleteFailed {
		action = "delete"
	}
	return fmt.Sprintf("the last %s failed: %v; retrying with backoff", action, s.LastError)
}

// roundBackoff drops sub-second noise so a duration stays readable.
func roundBackoff(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func configMessage(err error) string {
	return fmt.Sprintf("insights-config rejected, keeping the last good config: %v", err)
}
