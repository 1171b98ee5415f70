package runtimeextractor

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// deniedRecheck is how long a read that RBAC denied is not asked again. The
// RBAC a host ships changes with a release, which restarts it; the recheck
// only bounds how long a grant made by hand goes unseen, at one 403 an hour.
const deniedRecheck = time.Hour

// deniedWhat says what each read of the diagnosis tells, for the log line of
// its denial.
var deniedWhat = map[string]string{
	status.DeniedPodsList:   "RolloutStuck and PodsUnavailable go without node names",
	status.DeniedEventsList: "RolloutStuck goes without the DaemonSet's newest warning (e.g. FailedCreate)",
}

// denials remembers the reads of the rollout diagnosis that RBAC denied.
// Embedded in a host whose RBAC lacks them (the Insights Operator's, as it
// ships: docs/embedding.md), the diagnosis then costs one 403 and one log
// line per read, instead of one per diagnosis and per lookup of names, and
// the messages say what is missing. Safe for concurrent use: the diagnosis
// and the lookups run on goroutines of their own.
type denials struct {
	clock clock.PassiveClock

	mu     sync.Mutex
	denied map[string]time.Time // read -> when RBAC last denied it
}

func newDenials(clk clock.PassiveClock) *denials {
	return &denials{clock: clk, denied: map[string]time.Time{}}
}

// try runs f, the read named read, unless RBAC denied it less than
// deniedRecheck ago. denied reports a denial, remembered or new; err is any
// other failure of f, which is not remembered.
func (d *denials) try(read string, f func() error) (denied bool, err error) {
	d.mu.Lock()
	at, known := d.denied[read]
	d.mu.Unlock()
	if known && d.clock.Since(at) < deniedRecheck {
		return true, nil
	}
	err = f()
	d.mu.Lock()
	defer d.mu.Unlock()
	_, remembered := d.denied[read] // another read may have been denied meanwhile
	switch {
	case apierrors.IsForbidden(err):
		if !remembered {
			klog.Warningf("%s in %s is forbidden, so %s; it is asked again in %s. The host's RBAC lacks it: see docs/embedding.md: %v",
				read, resources.Namespace, deniedWhat[read], deniedRecheck, err)
		}
		d.denied[read] = d.clock.Now()
		return true, nil
	case err == nil && remembered:
		klog.Infof("%s in %s is allowed again", read, resources.Namespace)
		delete(d.denied, read)
	}
	return false, err
}
