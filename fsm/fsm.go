// Package fsm is the lifecycle state machine of the runtime extractor DaemonSet. It does no I/O: Fire
// returns the transition whose Action the caller carries out, the outcome coming back as another
// event. The looplab/fsm machine and the diagrams are built from one table, so they cannot disagree.
package fsm

// State is a lifecycle state of the managed DaemonSet.
type State string

// The six states.
const (
	StateDisabled  State = "Disabled"  // extractor disabled, nothing deployed
	StateDeploying State = "Deploying" // (re)applied, rollout not complete
	StateRunning   State = "Running"   // matches the desired state and is rolled out
	StateUpgrading State = "Upgrading" // a new release version is rolling out
	StateDrifted   State = "Drifted"   // changed or deleted by someone else; being restored
	StateDeleting  State = "Deleting"  // being removed because the extractor was disabled
)

// Enabled reports whether s wants the DaemonSet to exist.
func (s State) Enabled() bool { return s != StateDisabled && s != StateDeleting && s != "" }

// States lists every state in a stable order (a new slice on each call).
func States() []State {
	return []State{StateDisabled, StateDeploying, StateRunning, StateUpgrading, StateDrifted, StateDeleting}
}

// Action is the one resource-manager action a transition asks for.
type Action string

// The actions.
const (
	ActionNone   Action = "None"
	ActionApply  Action = "Apply"  // apply the DaemonSet computed from the current inputs
	ActionDelete Action = "Delete" // delete the DaemonSet if the cache shows it present
	ActionRetry  Action = "Retry"  // after a backoff, re-fire the config as Enabled/Disabled: never a stale action
)

// Actions lists every action in a stable order (a new slice on each call).
func Actions() []Action { return []Action{ActionNone, ActionApply, ActionDelete, ActionRetry} }

// Transition is what one Fire did.
type Transition struct {
	From, To State
	Event    Event
	Action   Action
	Note     string // explains a guarded decision, e.g. an ignored stale RolloutComplete
}

// Changed reports whether the state moved.
func (t Transition) Changed() bool { return t.From != t.To }
