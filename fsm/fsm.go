// Package fsm is the lifecycle state machine of the runtime extractor DaemonSet.
//
// It is pure: it imports no Kubernetes client and performs no I/O. Sources turn
// cluster facts into typed events; Machine.Fire looks the (state, event) pair up in
// the transition table and returns the transition, whose Action the caller carries
// out and whose outcome comes back as another event. The table is data (Table), the
// looplab/fsm machine is built from it, and the diagrams are rendered from it, so
// the three can never disagree.
package fsm

// State is a lifecycle state of the managed DaemonSet.
type State string

// The six states.
const (
	// StateDisabled: the runtime extractor is disabled and nothing is deployed.
	StateDisabled State = "Disabled"
	// StateDeploying: the DaemonSet was (re)applied and its rollout is not complete.
	StateDeploying State = "Deploying"
	// StateRunning: the DaemonSet matches the desired state and is rolled out.
	StateRunning State = "Running"
	// StateUpgrading: a new release version is being rolled out.
	StateUpgrading State = "Upgrading"
	// StateDrifted: someone else changed or deleted the DaemonSet; it is being restored.
	StateDrifted State = "Drifted"
	// StateDeleting: the DaemonSet is being removed because the extractor was disabled.
	StateDeleting State = "Deleting"
)

// Enabled reports whether s is a state of an enabled runtime extractor: one
// that wants the DaemonSet to exist (Deploying, Running, Upgrading, Drifted).
func (s State) Enabled() bool {
	return s != StateDisabled && s != StateDeleting && s != ""
}

// States lists every state in a stable order (a new slice on each call).
func States() []State {
	return []State{StateDisabled, StateDeploying, StateRunning, StateUpgrading, StateDrifted, StateDeleting}
}

// Action is the one resource-manager action a transition asks for.
type Action string

// The actions.
const (
	// ActionNone: nothing to do.
	ActionNone Action = "None"
	// ActionApply: compute the desired DaemonSet from the current inputs and apply it.
	ActionApply Action = "Apply"
	// ActionDelete: delete the DaemonSet if the cache shows it present.
	ActionDelete Action = "Delete"
	// ActionRetry: after a backoff, re-assert the level: re-fire the observed config as
	// Enabled or Disabled, so the retry runs what the state then wants, never a stale action.
	ActionRetry Action = "Retry"
)

// Actions lists every action in a stable order (a new slice on each call).
func Actions() []Action { return []Action{ActionNone, ActionApply, ActionDelete, ActionRetry} }

// Transition is what one Fire did.
type Transition struct {
	From   State
	To     State
	Event  Event
	Action Action
	// Note explains a guarded decision, e.g. a stale RolloutComplete that was ignored.
	Note string
}

// Changed reports whether the state moved.
func (t Transition) Changed() bool { return t.From != t.To }
