// Package status reports the runtime extractor's state as conditions on a
// ClusterOperator, so a cluster admin can read what the controller is doing and why
// without reading its logs.
package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
)

// RolloutStuck describes a rollout that made no progress for the deadline.
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
}

func (r *RolloutStuck) message(s Snapshot) string {
	msg := fmt.Sprintf("rollout made no progress for %s: %d of %d nodes not ready", roundBackoff(r.For), r.NotReady, s.Desired)
	if len(r.Nodes) > 0 {
		msg += " (" + strings.Join(r.Nodes, ", ")
		if int(r.NotReady) > len(r.Nodes) {
			msg += ", ..."
		}
		msg += ")"
	}
	if r.Warning != "" {
		msg += "; newest warning on the DaemonSet: " + r.Warning
	}
	return msg
}

func (r *RolloutStuck) equal(o *RolloutStuck) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.NotReady == o.NotReady && slices.Equal(r.Nodes, o.Nodes) && r.Warning == o.Warning
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
	Failures int
	// LastError is the last action error, nil when healthy.
	LastError error
	// RetryIn is the backoff before the next retry, 0 when none is pending.
	RetryIn time.Duration
	// ConfigError is why insights-config was rejected (the last good config is kept);
	// nil when the current config is good.
	ConfigError error
	// Stuck is set while the rollout made no progress for the rollout deadline.
	Stuck *RolloutStuck
}

// Equal reports whether s and o say the same (errors compare by message).
func (s Snapshot) Equal(o Snapshot) bool {
	return s.State == o.State && s.Version == o.Version &&
		s.Desired == o.Desired && s.Updated == o.Updated && s.Available == o.Available &&
		s.Failures == o.Failures && s.RetryIn == o.RetryIn &&
		errorText(s.LastError) == errorText(o.LastError) && errorText(s.ConfigError) == errorText(o.ConfigError) &&
		s.Stuck.equal(o.Stuck)
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Conditions derives the three RuntimeExtractor* conditions from s, in the order of
// ConditionTypes. The zero Snapshot (no State: nothing observed yet) gives all
// three Unknown [Starting]. It is pure: LastTransitionTime is left zero for the Reporter to set.
//
// The matrix, by state (status and reason; "pods>0" means True when at least one
// pod is available, else False):
//
//	state      Available                 Progressing
//	Disabled   True   Disabled           False  Disabled
//	Deploying  pods>0 RollingOut         True   RollingOut
//	Running    True   AsExpected         False  AsExpected
//	Upgrading  pods>0 Upgrading          True   Upgrading
//	Drifted    pods>0 Restoring          True   Restoring
//	Deleting   True   Deleting           True   Deleting
//
// Disabled is a healthy state the admin asked for, so it is Available, not
// Progressing and not Degraded. Deleting converges on it, so it stays Available
// while it makes progress. In the three rollout states the extractor is available
// as long as one pod serves; when none does and an action is failing, the
// Available=False reason names the failure (ApplyFailed) instead of the rollout.
//
// Degraded is independent of the state: True [ApplyFailed, or DeleteFailed in
// Disabled and Deleting] once an action failed (Failures >= 1 with a LastError),
// else True [RolloutStuck] while the rollout made no progress for the rollout
// deadline, else True [InvalidConfig] when insights-config was rejected, else
// False [AsExpected]. A failing action and a rejected config together report the action's
// reason and both messages.
func Conditions(s Snapshot) []configv1.ClusterOperatorStatusCondition {
	if s.State == "" {
		return starting()
	}
	return []configv1.ClusterOperatorStatusCondition{available(s), progressing(s), degraded(s)}
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
	switch s.State {
	case fsm.StateDisabled:
		c.Reason, c.Message = ReasonDisabled, disabledMessage
	case fsm.StateDeleting:
		c.Reason, c.Message = ReasonDeleting, "runtime extractor is being removed as insights-config disables it"
	case fsm.StateRunning:
		c.Reason = ReasonAsExpected
		c.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes%s", s.Available, s.Desired, atVersion(s.Version))
	default: // a rollout in progress: Deploying, Upgrading, Drifted, or a state this package does not know yet
		c.Reason = stateReason(s.State)
		if s.Available > 0 {
			c.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes while %s", s.Available, s.Desired, progressMessage(s))
			break
		}
		c.Status = configv1.ConditionFalse
		c.Message = "no runtime extractor pod is available yet: " + progressMessage(s)
		if failing(s) {
			c.Reason = failureReason(s.State)
			c.Message = "no runtime extractor pod is available: " + failureMessage(s)
		}
	}
	return c
}

func progressing(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionProgressing, Status: configv1.ConditionTrue, Reason: stateReason(s.State)}
	switch s.State {
	case fsm.StateDisabled:
		c.Status, c.Message = configv1.ConditionFalse, disabledMessage
	case fsm.StateRunning:
		c.Status = configv1.ConditionFalse
		c.Message = fmt.Sprintf("runtime extractor is rolled out on %d/%d nodes%s", s.Available, s.Desired, atVersion(s.Version))
	case fsm.StateDeleting:
		c.Message = "removing the runtime extractor: disabled by insights-config"
	default:
		c.Message = progressMessage(s)
	}
	return c
}

func degraded(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionDegraded}
	switch {
	case failing(s):
		c.Status, c.Reason, c.Message = configv1.ConditionTrue, failureReason(s.State), failureMessage(s)
		if s.ConfigError != nil {
			c.Message += "; " + configMessage(s.ConfigError)
		}
	case s.Stuck != nil:
		c.Status, c.Reason, c.Message = configv1.ConditionTrue, ReasonRolloutStuck, s.Stuck.message(s)
		if s.ConfigError != nil {
			c.Message += "; " + configMessage(s.ConfigError)
		}
	case s.ConfigError != nil:
		c.Status, c.Reason, c.Message = configv1.ConditionTrue, ReasonInvalidConfig, configMessage(s.ConfigError)
	default:
		c.Status, c.Reason, c.Message = configv1.ConditionFalse, ReasonAsExpected, "no errors"
	}
	return c
}

const disabledMessage = "runtime extractor is disabled by insights-config"

// stateReason is the reason a state gives Progressing, and Available while rolling out.
func stateReason(s fsm.State) string {
	switch s {
	case fsm.StateDisabled:
		return ReasonDisabled
	case fsm.StateDeploying:
		return ReasonRollingOut
	case fsm.StateUpgrading:
		return ReasonUpgrading
	case fsm.StateDrifted:
		return ReasonRestoring
	case fsm.StateDeleting:
		return ReasonDeleting
	default:
		return ReasonAsExpected
	}
}

// progressMessage describes a rollout, e.g. "rolling out 2/3 nodes to 4.22.1".
// A node counts as done when its pod is both updated and available; the two counts
// bound that from above, so their minimum is reported.
func progressMessage(s Snapshot) string {
	done := min(s.Updated, s.Available)
	var verb string
	switch s.State {
	case fsm.StateUpgrading:
		verb = "upgrading"
	case fsm.StateDrifted:
		verb = "restoring after an external change: rolling out"
	default:
		verb = "rolling out"
	}
	msg := fmt.Sprintf("%s %d/%d nodes", verb, done, s.Desired)
	if s.Version != "" {
		msg += " to " + s.Version
	}
	return msg
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
	if s == fsm.StateDisabled || s == fsm.StateDeleting {
		return ReasonDeleteFailed
	}
	return ReasonApplyFailed
}

// failureMessage reads e.g. "apply failed 4 times: forbidden: ...; retrying in 8s".
func failureMessage(s Snapshot) string {
	action := "apply"
	if failureReason(s.State) == ReasonDeleteFailed {
		action = "delete"
	}
	times := "once"
	if s.Failures > 1 {
		times = fmt.Sprintf("%d times", s.Failures)
	}
	msg := fmt.Sprintf("%s failed %s: %v", action, times, s.LastError)
	if s.RetryIn > 0 {
		msg += "; retrying in " + roundBackoff(s.RetryIn).String()
	}
	return msg
}

// roundBackoff drops the jitter's sub-second noise so the message stays readable.
func roundBackoff(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func configMessage(err error) string {
	return fmt.Sprintf("insights-config rejected, keeping the last good config: %v", err)
}
