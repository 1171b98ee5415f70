package status

import (
	"errors"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	"regexp"
	"testing"
	"time"

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

	// Per state with pods available: Available and Progressing do not depend on the cause.
	byState := map[fsm.State]struct {
		available, progressing string
		failReason             string // Degraded reason of a failing action in this state
	}{
		fsm.StateDisabled:  {"True Disabled", "False Disabled", ReasonDeleteFailed},
		fsm.StateDeploying: {"True RollingOut", "True RollingOut", ReasonApplyFailed},
		fsm.StateRunning:   {"True AsExpected", "False AsExpected", ReasonApplyFailed},
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
		{"action failing", func(s *Snapshot) { s.Failures, s.LastError, s.RetryIn = 3, errForbidden, 4*time.Second },
			func(r string) string { return "True " + r }},
		{"config rejected", func(s *Snapshot) { s.ConfigError = errConfig },
			func(string) string { return "True InvalidConfig" }},
		{"action failing and config rejected", func(s *Snapshot) { s.Failures, s.LastError, s.ConfigError = 1, errForbidden, errConfig },
			func(r string) string { return "True " + r }},
		{"failure count without an error", func(s *Snapshot) { s.Failures = 2 },
			func(string) string { return "False AsExpected" }},
		{"stale error after a success", func(s *Snapshot) { s.LastError = errForbidden },
			func(string) string { return "False AsExpected" }},
	}

	require.Len(t, byState, len(fsm.States), "every state has expectations")
	for _, state := range fsm.States {
		exp := byState[state]
		for _, cause := range causes {
			t.Run(string(state)+"/"+cause.name, func(t *testing.T) {
				s := Snapshot{State: state, Version: "4.22.1", Desired: 3, Updated: 2, Available: 2}
				cause.apply(&s)
				assertConditions(t, s, want{exp.available, exp.progressing, cause.degraded(exp.failReason)})
			})
		}
	}
}

// In the rollout states Available turns False when no pod serves, and names a
// failing action when there is one.
func TestConditionsNoPodAvailable(t *testing.T) {
	cases := []struct {
		state   fsm.State
		failing bool
		want    want
	}{
		{fsm.StateDeploying, false, want{"False RollingOut", "True RollingOut", "False AsExpected"}},
		{fsm.StateDeploying, true, want{"False ApplyFailed", "True RollingOut", "True ApplyFailed"}},
		{fsm.StateUpgrading, false, want{"False Upgrading", "True Upgrading", "False AsExpected"}},
		{fsm.StateUpgrading, true, want{"False ApplyFailed", "True Upgrading", "True ApplyFailed"}},
		{fsm.StateDrifted, false, want{"False Restoring", "True Restoring", "False AsExpected"}},
		{fsm.StateDrifted, true, want{"False ApplyFailed", "True Restoring", "True ApplyFailed"}},
		// Running means the rollout completed, even on zero matching nodes.
		{fsm.StateRunning, false, want{"True AsExpected", "False AsExpected", "False AsExpected"}},
		// Disabled and Deleting never had pods to offer; they stay Available.
		{fsm.StateDisabled, true, want{"True Disabled", "False Disabled", "True DeleteFailed"}},
		{fsm.StateDeleting, true, want{"True Deleting", "True Deleting", "True DeleteFailed"}},
	}
	for _, c := range cases {
		t.Run(string(c.state), func(t *testing.T) {
			s := Snapshot{State: c.state, Version: "4.22.1"}
			if c.failing {
				s.Failures, s.LastError = 1, errors.New("forbidden")
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

	cases := []struct {
		name string
		s    Snapshot
		typ  configv1.ClusterStatusConditionType
		want string
	}{
		{"rollout progress", Snapshot{State: fsm.StateDeploying, Version: "4.22.1", Desired: 3, Updated: 2, Available: 2},
			ConditionProgressing, "rolling out 2/3 nodes to 4.22.1"},
		{"a node counts when updated and available", Snapshot{State: fsm.StateDeploying, Version: "4.22.1", Desired: 3, Updated: 3, Available: 1},
			ConditionProgressing, "rolling out 1/3 nodes to 4.22.1"},
		{"rollout without a known version", Snapshot{State: fsm.StateDeploying, Desired: 3, Updated: 1, Available: 1},
			ConditionProgressing, "rolling out 1/3 nodes"},
		{"upgrade progress", Snapshot{State: fsm.StateUpgrading, Version: "4.22.1", Desired: 3, Updated: 1, Available: 3},
			ConditionProgressing, "upgrading 1/3 nodes to 4.22.1"},
		{"available during an upgrade", Snapshot{State: fsm.StateUpgrading, Version: "4.22.1", Desired: 3, Updated: 1, Available: 3},
			ConditionAvailable, "runtime extractor is available on 3/3 nodes while upgrading 1/3 nodes to 4.22.1"},
		{"restore progress", Snapshot{State: fsm.StateDrifted, Version: "4.22.1", Desired: 3},
			ConditionProgressing, "restoring after an external change: rolling out 0/3 nodes to 4.22.1"},
		{"nothing available yet", Snapshot{State: fsm.StateDeploying, Version: "4.22.1", Desired: 3},
			ConditionAvailable, "no runtime extractor pod is available yet: rolling out 0/3 nodes to 4.22.1"},
		{"running", Snapshot{State: fsm.StateRunning, Version: "4.22.1", Desired: 3, Updated: 3, Available: 3},
			ConditionAvailable, "runtime extractor is available on 3/3 nodes at version 4.22.1"},
		{"disabled", Snapshot{State: fsm.StateDisabled},
			ConditionAvailable, "runtime extractor is disabled by insights-config"},
		{"deleting", Snapshot{State: fsm.StateDeleting},
			ConditionProgressing, "removing the runtime extractor: disabled by insights-config"},
		{"apply failing, jittered backoff rounded", Snapshot{State: fsm.StateRunning, Failures: 4, LastError: forbidden, RetryIn: 8*time.Second + 123*time.Millisecond},
			ConditionDegraded, `apply failed 4 times: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying in 8s`},
		{"first failure, sub-second backoff", Snapshot{State: fsm.StateDeploying, Failures: 1, LastError: forbidden, RetryIn: 5 * time.Millisecond},
			ConditionDegraded, `apply failed once: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying in 5ms`},
		{"delete failing, no retry pending", Snapshot{State: fsm.StateDeleting, Failures: 2, LastError: forbidden},
			ConditionDegraded, `delete failed 2 times: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update`},
		{"apply failing with no pod", Snapshot{State: fsm.StateDrifted, Desired: 2, Failures: 2, LastError: forbidden, RetryIn: 2 * time.Second},
			ConditionAvailable, `no runtime extractor pod is available: apply failed 2 times: daemonsets.apps "insights-runtime-extractor" is forbidden: User cannot update; retrying in 2s`},
		{"config rejected", Snapshot{State: fsm.StateRunning, ConfigError: badConfig},
			ConditionDegraded, "insights-config rejected, keeping the last good config: dataReporting.runtimeExtractor.nodeSelector: must be a map"},
		{"failing and config rejected", Snapshot{State: fsm.StateRunning, Failures: 1, LastError: errors.New("timeout"), RetryIn: time.Second, ConfigError: badConfig},
			ConditionDegraded, "apply failed once: timeout; retrying in 1s; insights-config rejected, keeping the last good config: dataReporting.runtimeExtractor.nodeSelector: must be a map"},
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
