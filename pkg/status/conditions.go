// Package status reports the runtime extractor's state as ClusterOperator conditions, so admins need no logs.
package status

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

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

// Condition reasons, CamelCase as the API conventions want; docs/operations.md says when each is given.
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

// The reads of the rollout diagnosis that RBAC may deny (the Insights Operator's shipped RBAC denies both).
const (
	DeniedPodsList   = "pods list"   // names the nodes
	DeniedEventsList = "events list" // gives the newest warning
	nodeNamesDenied  = "node names unavailable: " + DeniedPodsList + " forbidden"
	configRejected   = "insights-config rejected, keeping the last good config: " // in Degraded
)

// DegradedReasons are the reasons RuntimeExtractorDegraded=True can carry (a new slice each call).
func DegradedReasons() []string {
	return []string{ReasonApplyFailed, ReasonDeleteFailed, ReasonConflictingWriter, ReasonRolloutStuck, ReasonInvalidConfig}
}

// Conditions derives the conditions from s in ConditionTypes order (docs/operations.md), LastTransitionTime aside.
func Conditions(s Snapshot) []configv1.ClusterOperatorStatusCondition {
	if s.State == "" { // caches not synced yet
		out := make([]configv1.ClusterOperatorStatusCondition, 0, len(ConditionTypes))
		for _, t := range ConditionTypes {
			out = append(out, configv1.ClusterOperatorStatusCondition{Type: t, Status: configv1.ConditionUnknown, Reason: ReasonStarting,
				Message: "the runtime extractor controller has not observed the cluster yet"})
		}
		return out
	}
	available, progressing := availableAndProgressing(s)
	out := []configv1.ClusterOperatorStatusCondition{available, progressing, degraded(s)}
	if s.State.Enabled() {
		if w := s.RepairWaits; w != nil { // the time, not a countdown, so the message stays while it waits
			out[0].Message += fmt.Sprintf("; the change by %s waits for its repair until %s: the repair budget is spent",
				strings.Join(w.Writers, ", "), w.At.UTC().Format(time.RFC3339))
		}
		out[0].Message += prefixed("; ", s.TLSProfileUnknown)
	}
	if failing(s) {
		out[1].Message += "; " + failureMessage(s)
	}
	for i := range out {
		out[i].Message = CapMessage(out[i].Message)
	}
	return out
}

// availableAndProgressing: Disabled, as the admin asked, is Available and not Progressing; Deleting stays Available.
func availableAndProgressing(s Snapshot) (a, p configv1.ClusterOperatorStatusCondition) {
	a = configv1.ClusterOperatorStatusCondition{Type: ConditionAvailable, Status: configv1.ConditionTrue}
	p = configv1.ClusterOperatorStatusCondition{Type: ConditionProgressing, Status: configv1.ConditionTrue}
	switch {
	case s.Holding:
		a.Reason = ReasonHolding
		p.Status, p.Reason = configv1.ConditionFalse, ReasonHolding
		p.Message = "holding: insights-config is invalid and no valid config has been seen since the controller started, so "
		if !s.Present {
			a.Status, a.Message = configv1.ConditionFalse, "no runtime extractor is deployed, and none will be until insights-config is valid"
			p.Message += "nothing is deployed"
			break
		}
		availableOn(&a, s, ", left as it is until insights-config is valid")
		p.Message += "the DaemonSet is left as it is"
	case !s.State.Enabled() && s.Terminating: // a DELETE that returned is not an object gone: say what it waits for
		until := map[bool]string{true: "it is gone", false: "then"}[len(s.Finalizers) == 0]
		a.Reason, a.Message = ReasonDeleting, "removing the runtime extractor, as insights-config disables it: "+
			"the DaemonSet is being deleted"+waitsFor(s)+"; its pods run until "+until
		p.Reason, p.Message = a.Reason, a.Message
	case s.State == fsm.StateDisabled:
		a.Reason, a.Message = ReasonDisabled, "runtime extractor is disabled by insights-config"
		p.Status, p.Reason, p.Message = configv1.ConditionFalse, a.Reason, a.Message
	case s.State == fsm.StateDeleting:
		a.Reason, a.Message = ReasonDeleting, "runtime extractor is being removed as insights-config disables it"
		p.Reason, p.Message = ReasonDeleting, "removing the runtime extractor: disabled by insights-config"
	default:
		progressing, reason, message := rolloutOf(s)
		a.Reason, p.Reason, p.Message = reason, reason, message
		if s.Stuck != nil && !tooFewPods(s) {
			p.Message += "; " + s.Stuck.Message(s)
		}
		switch {
		case !progressing: // rolled out: only the pods can be missing
			p.Status = configv1.ConditionFalse
			if s.Available < s.Desired {
				a.Reason = ReasonPodsUnavailable
			}
			availableOn(&a, s, "")
		case s.Present && servesPods(s):
			a.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes while %s", s.Available, s.Desired, message) +
				unavailableMessage(s)
		case failing(s):
			a.Status, a.Reason = configv1.ConditionFalse, failureReason(s.State)
			a.Message = "no runtime extractor pod is available: " + failureMessage(s)
		default:
			a.Status, a.Message = configv1.ConditionFalse, "no runtime extractor pod is available yet: "+message
		}
	}
	return a, p
}

// availableOn says on how many nodes a pod is available, and Available is False without pods to serve.
func availableOn(a *configv1.ClusterOperatorStatusCondition, s Snapshot, suffix string) {
	if !servesPods(s) {
		a.Status = configv1.ConditionFalse
	}
	a.Message = fmt.Sprintf("runtime extractor is available on %d/%d nodes%s%s", s.Available, s.Desired, prefixed(" at version ", s.AppliedVersion), suffix) +
		unavailableMessage(s)
}

// tooFewPods is when a stuck rollout degrades: no pod available, or more nodes without one than maxUnavailable
// allows (or that is unknown). As in cluster-dns-operator, one broken node is for Progressing to say.
func tooFewPods(s Snapshot) bool {
	return s.Available == 0 || s.MaxUnavailable < 0 || s.Desired-s.Available > s.MaxUnavailable
}

func servesPods(s Snapshot) bool { return s.Available > 0 || s.Desired == 0 }

// rolloutOf says whether an enabled runtime extractor progresses, Available's reason and Progressing's message,
// from the cluster, not the machine's history, so replicas agree; only a rollout in progress asks the state why.
func rolloutOf(s Snapshot) (progressing bool, reason, message string) {
	switch {
	case s.Terminating: // deleted before insights-config enabled it again
		return true, ReasonRollingOut, "the DaemonSet is being deleted" + waitsFor(s) + "; it is created anew once it is gone"
	case !s.Present:
		return true, ReasonRollingOut, "deploying the runtime extractor" + prefixed(" at version ", s.Version) + ": the DaemonSet does not exist yet"
	case s.Version != "" && s.AppliedVersion != s.Version:
		// A refused upgrade, or one the cache does not show yet: no pod is upgrading.
		at := map[bool]string{true: "carries no version", false: "is still at version " + s.AppliedVersion}[s.AppliedVersion == ""]
		return true, ReasonUpgrading, "the upgrade to " + s.Version + " is not applied: the DaemonSet " + at
	case s.RolledOut:
		return false, ReasonAsExpected,
			fmt.Sprintf("runtime extractor is rolled out on %d/%d nodes%s", s.Updated, s.Desired, prefixed(" at version ", s.AppliedVersion))
	}
	// The message counts the nodes that run a pod of the current template, available or not (Available says that).
	reason, message = ReasonRollingOut, "rolling out"
	switch s.State {
	case fsm.StateUpgrading:
		reason, message = ReasonUpgrading, "upgrading"
	case fsm.StateDrifted:
		reason, message = ReasonRestoring, "restoring after an external change: rolling out"
	}
	to := prefixed(" to ", s.Version)
	if s.Updated >= s.Desired { // not RolledOut, so the counts predate the current generation
		return true, reason, message + to + ": waiting for the DaemonSet controller to observe the new spec"
	}
	return true, reason, fmt.Sprintf("%s %d/%d nodes%s", message, s.Updated, s.Desired, to)
}

func degraded(s Snapshot) configv1.ClusterOperatorStatusCondition {
	c := configv1.ClusterOperatorStatusCondition{Type: ConditionDegraded, Status: configv1.ConditionTrue}
	switch {
	case failing(s) && s.FailurePersists:
		c.Reason, c.Message = failureReason(s.State), failureMessage(s)
	case s.Conflict != nil:
		// Before RolloutStuck: each of the other writer's changes starts a rollout, so the fight causes a stuck one.
		c.Reason, c.Message = ReasonConflictingWriter, s.Conflict.message()
	case s.Stuck != nil && tooFewPods(s):
		c.Reason, c.Message = ReasonRolloutStuck, s.Stuck.Message(s)
	case s.ConfigError != nil:
		c.Reason, c.Message = ReasonInvalidConfig, configRejected+fmt.Sprint(s.ConfigError)
	default:
		c.Status, c.Reason, c.Message = configv1.ConditionFalse, ReasonAsExpected, "no errors"
	}
	// A rejected config under a reason that takes precedence is still said.
	if s.ConfigError != nil && c.Reason != ReasonInvalidConfig {
		c.Message += "; " + configRejected + fmt.Sprint(s.ConfigError)
	}
	return c
}

func failing(s Snapshot) bool { return s.Failures >= 1 && s.LastError != nil }

// failureReason: the states that remove the DaemonSet fail on deletes, the others on applies.
func failureReason(s fsm.State) string {
	return map[bool]string{true: ReasonApplyFailed, false: ReasonDeleteFailed}[s.Enabled()]
}

// failureMessage names no count nor delay: they change with every retry (the Event and metrics carry them).
func failureMessage(s Snapshot) string {
	action := map[bool]string{true: "apply", false: "delete"}[s.State.Enabled()]
	return fmt.Sprintf("the last %s failed: %v; retrying with backoff", action, s.LastError)
}

func waitsFor(s Snapshot) string {
	if len(s.Finalizers) == 0 {
		return ""
	}
	return fmt.Sprintf(" and waits for %s %s to be removed",
		map[bool]string{true: "finalizer", false: "finalizers"}[len(s.Finalizers) == 1], strings.Join(s.Finalizers, ", "))
}

// unavailableMessage names how many nodes lack an available pod, against maxUnavailable, and a few of them.
func unavailableMessage(s Snapshot) string {
	n := s.Desired - s.Available
	if n <= 0 {
		return ""
	}
	msg := fmt.Sprintf("; %d %s no available pod", n, map[bool]string{true: "node has", false: "nodes have"}[n == 1])
	if s.MaxUnavailable >= 0 {
		msg += fmt.Sprintf(" (%s maxUnavailable %d)", map[bool]string{true: "more than", false: "within"}[n > s.MaxUnavailable], s.MaxUnavailable)
	}
	switch {
	case len(s.UnavailableNodes) > 0:
		msg += ": " + someNodes(s.UnavailableNodes, n)
	case s.UnavailableNodesDenied:
		msg += "; " + nodeNamesDenied
	}
	return msg
}

// someNodes lists nodes, a few of the n meant, ending with "..." when n is more.
func someNodes(nodes []string, n int32) string {
	return strings.Join(nodes, ", ") + map[bool]string{true: ", ...", false: ""}[int(n) > len(nodes)]
}

func prefixed(prefix, v string) string { return map[bool]string{true: prefix + v}[v != ""] }

// roundBackoff drops sub-second noise so a duration stays readable.
func roundBackoff(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// MaxMessageBytes bounds a condition or Event message: an error can quote insights-config whole (hundreds of KB).
const MaxMessageBytes = 1024

// CapMessage cuts msg to MaxMessageBytes on a UTF-8 boundary, ending with a marker of how many bytes were cut.
func CapMessage(msg string) string {
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	// Reserving the marker for len(msg), at least as long as the one for the bytes cut, keeps within bounds.
	keep := MaxMessageBytes - len(cutMarker(len(msg)))
	for keep > 0 && !utf8.RuneStart(msg[keep]) {
		keep--
	}
	return msg[:keep] + cutMarker(len(msg)-keep)
}

func cutMarker(n int) string { return fmt.Sprintf(" ... [%d bytes cut]", n) }
