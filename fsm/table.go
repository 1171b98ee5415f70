package fsm

import "slices"

// Row is one entry of the transition table: in state From, Event leads to To and Action.
type Row struct {
	From   State
	Event  EventName
	To     State
	Action Action
}

// table has one row per (state, event) pair, do-nothing rows included (TestTableIsTotal). Departures from the design:
//   - AppliedUnchanged is split from Applied: in Running only a write starts a rollout (no resync churn).
//   - Disabled+DeleteFailed goes to Deleting/Retry: what is still there must be retried.
//   - An apply outcome in Disabled or Deleting asks for Delete: that DaemonSet must not exist.
var table = []Row{
	{StateDisabled, EventEnabled, StateDeploying, ActionApply},
	{StateDisabled, EventDisabled, StateDisabled, ActionDelete}, // the executor deletes only what the cache shows
	{StateDisabled, EventVersionChanged, StateDisabled, ActionNone},
	{StateDisabled, EventModified, StateDeleting, ActionDelete},
	{StateDisabled, EventDeleted, StateDisabled, ActionNone},
	{StateDisabled, EventRolloutComplete, StateDisabled, ActionNone},
	{StateDisabled, EventApplied, StateDeleting, ActionDelete},
	{StateDisabled, EventAppliedUnchanged, StateDeleting, ActionDelete},
	{StateDisabled, EventApplyFailed, StateDisabled, ActionNone},
	{StateDisabled, EventDeleteDone, StateDisabled, ActionNone},
	{StateDisabled, EventDeleteFailed, StateDeleting, ActionRetry},

	{StateDeploying, EventEnabled, StateDeploying, ActionApply},
	{StateDeploying, EventDisabled, StateDeleting, ActionDelete},
	{StateDeploying, EventVersionChanged, StateDeploying, ActionApply},
	{StateDeploying, EventModified, StateDeploying, ActionApply},
	{StateDeploying, EventDeleted, StateDeploying, ActionApply},
	{StateDeploying, EventRolloutComplete, StateRunning, ActionNone},
	{StateDeploying, EventApplied, StateDeploying, ActionNone},
	{StateDeploying, EventAppliedUnchanged, StateDeploying, ActionNone},
	{StateDeploying, EventApplyFailed, StateDeploying, ActionRetry},
	{StateDeploying, EventDeleteDone, StateDeploying, ActionNone},
	{StateDeploying, EventDeleteFailed, StateDeploying, ActionNone},

	{StateRunning, EventEnabled, StateRunning, ActionApply},
	{StateRunning, EventDisabled, StateDeleting, ActionDelete},
	{StateRunning, EventVersionChanged, StateUpgrading, ActionApply},
	{StateRunning, EventModified, StateDrifted, ActionApply},
	{StateRunning, EventDeleted, StateDrifted, ActionApply},
	{StateRunning, EventRolloutComplete, StateRunning, ActionNone},
	{StateRunning, EventApplied, StateDeploying, ActionNone},
	{StateRunning, EventAppliedUnchanged, StateRunning, ActionNone},
	{StateRunning, EventApplyFailed, StateRunning, ActionRetry},
	{StateRunning, EventDeleteDone, StateRunning, ActionNone},
	{StateRunning, EventDeleteFailed, StateRunning, ActionNone},

	{StateUpgrading, EventEnabled, StateUpgrading, ActionApply},
	{StateUpgrading, EventDisabled, StateDeleting, ActionDelete},
	{StateUpgrading, EventVersionChanged, StateUpgrading, ActionApply},
	{StateUpgrading, EventModified, StateDrifted, ActionApply},
	{StateUpgrading, EventDeleted, StateDrifted, ActionApply},
	{StateUpgrading, EventRolloutComplete, StateRunning, ActionNone},
	{StateUpgrading, EventApplied, StateUpgrading, ActionNone},
	{StateUpgrading, EventAppliedUnchanged, StateUpgrading, ActionNone},
	{StateUpgrading, EventApplyFailed, StateUpgrading, ActionRetry},
	{StateUpgrading, EventDeleteDone, StateUpgrading, ActionNone},
	{StateUpgrading, EventDeleteFailed, StateUpgrading, ActionNone},

	{StateDrifted, EventEnabled, StateDrifted, ActionApply},
	{StateDrifted, EventDisabled, StateDeleting, ActionDelete},
	{StateDrifted, EventVersionChanged, StateUpgrading, ActionApply},
	{StateDrifted, EventModified, StateDrifted, ActionApply},
	{StateDrifted, EventDeleted, StateDrifted, ActionApply},
	{StateDrifted, EventRolloutComplete, StateRunning, ActionNone},
	{StateDrifted, EventApplied, StateDrifted, ActionNone},
	{StateDrifted, EventAppliedUnchanged, StateDrifted, ActionNone},
	{StateDrifted, EventApplyFailed, StateDrifted, ActionRetry},
	{StateDrifted, EventDeleteDone, StateDrifted, ActionNone},
	{StateDrifted, EventDeleteFailed, StateDrifted, ActionNone},

	{StateDeleting, EventEnabled, StateDeploying, ActionApply},
	{StateDeleting, EventDisabled, StateDeleting, ActionDelete},
	{StateDeleting, EventVersionChanged, StateDeleting, ActionNone},
	{StateDeleting, EventModified, StateDeleting, ActionDelete},
	{StateDeleting, EventDeleted, StateDisabled, ActionNone},
	{StateDeleting, EventRolloutComplete, StateDeleting, ActionNone},
	{StateDeleting, EventApplied, StateDeleting, ActionDelete},
	{StateDeleting, EventAppliedUnchanged, StateDeleting, ActionDelete},
	{StateDeleting, EventApplyFailed, StateDeleting, ActionNone},
	{StateDeleting, EventDeleteDone, StateDisabled, ActionNone},
	{StateDeleting, EventDeleteFailed, StateDeleting, ActionRetry},
}

// Table returns a copy of the transition table, in state-major, event-minor order.
func Table() []Row { return slices.Clone(table) }
