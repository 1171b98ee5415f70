package status

import (
	"slices"
	"time"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// Snapshot is what the controller knows at one moment, the only input of Conditions.
type Snapshot struct {
	State   fsm.State
	Version string // the target release version, "" when unknown
	// The DaemonSet's desiredNumberScheduled, updatedNumberScheduled and numberAvailable; 0 when absent.
	Desired, Updated, Available int32
	Failures                    int           // consecutive failed actions; 0 once one succeeds
	LastError                   error         // nil when healthy
	RetryIn                     time.Duration // 0 when no retry is pending
	// FailurePersists: LastError outlasted the Degraded inertia or no retry can fix it; Degraded is not for blips.
	FailurePersists bool
	ConfigError     error              // why insights-config was rejected (the last good one is kept)
	Stuck           *RolloutStuck      // while the rollout made no progress for the rollout deadline
	Conflict        *ConflictingWriter // while another writer keeps undoing the controller's repairs
	RepairWaits     *RepairWait        // while the repair gate holds a repair back for its budget
	// Holding: insights-config is invalid and none valid was seen since the start: the controller changes nothing.
	Holding        bool
	Present        bool   // the DaemonSet exists in the controller's cache
	AppliedVersion string // the DaemonSet's version annotation; "" when absent or unannotated
	// RolledOut: the current generation is observed and runs on every node that should (resources.Rollout.Complete).
	RolledOut bool
	// The DaemonSet's maxUnavailable resolved against Desired as its controller does; -1 for none or unresolvable.
	MaxUnavailable int32
	// UnavailableNodes: a few nodes (sorted) with no ready pod, read once a rolled-out count settles; nil: none, unread.
	UnavailableNodes       []string
	UnavailableNodesDenied bool     // RBAC forbids listing pods (DeniedPodsList)
	Terminating            bool     // the DaemonSet has a deletionTimestamp
	Finalizers             []string // what its deletion waits for
	// TLSProfileUnknown: why the cluster TLS profile is unreadable and what kube-rbac-proxy gets; "" when known.
	TLSProfileUnknown string
}

// Equal reports whether s and o say the same (errors compare by message). It leaves out Failures and RetryIn:
// they change with every retry and no condition shows them, so a retry failing as the last changes no status.
func (s Snapshot) Equal(o Snapshot) bool {
	return s.State == o.State && s.Version == o.Version &&
		s.Desired == o.Desired && s.Updated == o.Updated && s.Available == o.Available &&
		failing(s) == failing(o) && s.FailurePersists == o.FailurePersists &&
		errorText(s.LastError) == errorText(o.LastError) && errorText(s.ConfigError) == errorText(o.ConfigError) &&
		s.Stuck.equal(o.Stuck) && s.Conflict.equal(o.Conflict) && s.RepairWaits.equal(o.RepairWaits) &&
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
