package status

import (
	"slices"
	"time"

	"github.com/insights-runtime-extractor/controller/fsm"
)

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
	// RepairWaits is set while the repair gate holds a repair back for its
	// budget.
	RepairWaits *RepairWait

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
