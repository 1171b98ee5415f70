// Package status reports the runtime extractor's state as conditions on a
// ClusterOperator, so an admin can see what the controller does, and why, without its logs.
package status

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// The condition types this package owns on the ClusterOperator; it writes no other.
const (
	ConditionAvailable   configv1.ClusterStatusConditionType = "RuntimeExtractorAvailable"
	ConditionProgressing configv1.ClusterStatusConditionType = "RuntimeExtractorProgressing"
	ConditionDegraded    configv1.ClusterStatusConditionType = "RuntimeExtractorDegraded"
)

// ConditionTypes lists the owned condition types in the order Conditions returns them.
var ConditionTypes = []configv1.ClusterStatusConditionType{ConditionAvailable, ConditionProgressing, ConditionDegraded}

// Condition reasons, CamelCase as the API conventions want them; docs/operations.md
// says when each is given.
const (
	ReasonAsExpected        = "AsExpected"
	ReasonDisabled          = "Disabled"
	ReasonRollingOut        = "RollingOut"
	ReasonUpgrading         = "Upgrading"
	ReasonRestoring         = "Restoring" // after someone else changed or deleted the DaemonSet
	ReasonDeleting          = "Deleting"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonDeleteFailed      = "DeleteFailed"
	ReasonInvalidConfig     = "InvalidConfig"
	ReasonRolloutStuck      = "RolloutStuck"
	ReasonStarting          = "Starting" // caches not synced yet: all three conditions Unknown
	ReasonHolding           = "Holding"  // insights-config invalid, no valid one seen since the start
	ReasonPodsUnavailable   = "PodsUnavailable"
	ReasonConflictingWriter = "ConflictingWriter"
)

// The reads of the rollout diagnosis that RBAC may deny (the Insights Operator's
// shipped RBAC denies both; docs/embedding.md).
const (
	DeniedPodsList   = "pods list"   // names the nodes
	DeniedEventsList = "events list" // gives the newest warning
)

// DegradedReasons are the reasons RuntimeExtractorDegraded=True can carry (a new slice each call).
func DegradedReasons() []string {
	return []string{ReasonApplyFailed, ReasonDeleteFailed, ReasonConflictingWriter, ReasonRolloutStuck, ReasonInvalidConfig}
}

// Conditions derives the three conditions from s, in ConditionTypes order, as the
// tables of docs/operations.md lay out; LastTransitionTime is left to the Reporter.
// Disabled is what the admin asked for, so it is Available and neither Progressing
// nor Degraded; Deleting converges on it, so it stays Available meanwhile.
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

// tooFewPods is when a stuck rollout degrades: no pod available, or more nodes
// without one than maxUnavailable allows (or that is unknown). It is
// cluster-dns-operator's rule for its DaemonSet: a pod stuck on one broken node,
// while the others run theirs, is not a degraded operator; Progressing says it.
func tooFewPods(s Snapshot) bool {
	over, known := overMaxUnavailable(s)
	return s.Available == 0 || !known || over
}

// overMaxUnavailable: more nodes lack an available pod than maxUnavailable allows.
func overMaxUnavailable(s Snapshot) (over, known bool) {
	return s.Desired-s.Available > s.MaxUnavailable, s.MaxUnavailable >= 0
}

// removing: the state wants no DaemonSet.
func removing(s Snapshot) bool { return s.State == fsm.StateDisabled || s.State == fsm.StateDeleting }

// rollout is what the cluster says of an enabled runtime extractor; Available
// shares the reason, message is Progressing's.
type rollout struct {
	progressing     bool
	reason, message string
}

// rolloutOf reads the enabled states from the cluster, not the machine's history,
// so a replica that starts now and one that ran all along say the same. Only a rollout
// with pods still to update takes its reason from the state, which knows what started it.
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
		// A refused upgrade, or one the cache does not show yet: no pod is upgrading.
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

// rolloutReason names a rollout with pods still to update after the state that started it.
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

// failureReason: the states that remove the DaemonSet fail on deletes, the others on applies.
func failureReason(s fsm.State) string {
	if !s.Enabled() {
		return ReasonDeleteFailed
	}
	return ReasonApplyFailed
}
