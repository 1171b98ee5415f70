// Package status reports the runtime extractor's state as conditions on a
// ClusterOperator, so a cluster admin can read what the controller is doing and why
// without reading its logs.
package status

import (
	"fmt"

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

// DegradedReasons are the reasons RuntimeExtractorDegraded=True can carry (a
// new slice on each call).
func DegradedReasons() []string {
	return []string{ReasonApplyFailed, ReasonDeleteFailed, ReasonConflictingWriter, ReasonRolloutStuck, ReasonInvalidConfig}
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
// progress for the rollout deadline and leaves too few pods (tooFewPods; otherwise Progressing's
// message ends with it), else True [InvalidConfig] when
// insights-config was rejected, else False [AsExpected]. A failing action and
// a rejected config together report the action's reason and both messages.
//
// While the repair gate holds a repair back for its budget (RepairWaits),
// Available's message ends with whose change waits, why, and until when.
//
// While the cluster TLS profile is unknown (TLSProfileUnknown), Available's
// message ends with why and what kube-rbac-proxy gets meanwhile, unless the
// runtime extractor is being removed or is disabled.
func Conditions(s Snapshot) []configv1.ClusterOperatorStatusCondition {
	if s.State == "" {
		return starting()
	}
	out := []configv1.ClusterOperatorStatusCondition{available(s), progressing(s), degraded(s)}
	if s.RepairWaits != nil && !removing(s) {
		out[0].Message += "; " + s.RepairWaits.message()
	}
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
		if s.Stuck != nil && !tooFewPods(s) {
			c.Message += "; " + s.Stuck.Message(s)
		}
	}
	return c
}

// tooFewPods is when a stuck rollout degrades: no pod is available, or more
// nodes are without one than the DaemonSet's maxUnavailable allows (or it is
// unknown). It is the rule of cluster-dns-operator, a payload operator that
// owns a DaemonSet (NoDNSPodsAvailable, MaxUnavailableDNSPodsExceeded): a pod
// stuck on one broken node, while the other nodes run theirs, is not a
// degraded operator. Progressing names it instead.
func tooFewPods(s Snapshot) bool {
	over, known := overMaxUnavailable(s)
	return s.Available == 0 || !known || over
}

// overMaxUnavailable: more nodes are without an available pod than the
// DaemonSet's maxUnavailable; known is false when that is unknown.
func overMaxUnavailable(s Snapshot) (over, known bool) {
	return s.Desired-s.Available > s.MaxUnavailable, s.MaxUnavailable >= 0
}

// removing: the state wants no DaemonSet.
func removing(s Snapshot) bool { return s.State == fsm.StateDisabled || s.State == fsm.StateDeleting }

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

func degraded(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionDegraded, Status: configv1.ConditionTrue}
	switch {
	case failing(s) && s.FailurePersists:
		c.Reason, c.Message = failureReason(s.State), failureMessage(s)
	case s.Conflict != nil:
		// Before RolloutStuck: each of the other writer's changes starts a
		// rollout of its own, so the fight is the cause of a stuck one.
		c.Reason, c.Message = ReasonConflictingWriter, s.Conflict.message()
	case s.Stuck != nil && tooFewPods(s):
		c.Reason, c.Message = ReasonRolloutStuck, s.Stuck.Message(s)
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

func failing(s Snapshot) bool { return s.Failures >= 1 && s.LastError != nil }

// failureReason names the action that failed: in the states that remove the
// DaemonSet the failing action is a delete, elsewhere an apply.
func failureReason(s fsm.State) string {
	if !s.Enabled() {
		return ReasonDeleteFailed
	}
	return ReasonApplyFailed
}
