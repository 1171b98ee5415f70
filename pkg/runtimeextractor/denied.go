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

// A read that RBAC denied is not asked again for deniedRecheckFirst, then
// twice as long after each further denial, up to deniedRecheckMax. At
// install, the RBAC is often bound seconds after the controller's first
// request, so the first recheck comes soon; the RBAC a host ships changes
// with a release, which restarts it, so the longest only bounds how long a
// grant made by hand goes unseen, at one 403 an hour.
const (
	deniedRecheckFirst = 30 * time.Second
	deniedRecheckMax   = time.Hour
)

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
	denied map[string]denial // by read
}

// denial is what is remembered of a read RBAC denied.
type denial struct {
	at    time.Time     // when RBAC last denied it
	after time.Duration // when it is asked again, after at
}

func newDenials(clk clock.PassiveClock) *denials {
	return &denials{clock: clk, denied: map[string]denial{}}
}

// try runs f, the read named read, unless RBAC denied it and its recheck
// has not come. denied reports a denial, remembered or new; err is any
// other failure of f, which is not remembered.
func (d *denials) try(read string, f func() error) (denied bool, err error) {
	d.mu.Lock()
	last, known := d.denied[read]
	d.mu.Unlock()
	if known && d.clock.Since(last.at) < last.after {
		return true, nil
	}
	err = f()
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, remembered := d.denied[read] // another read may have been denied meanwhile
	switch {
	case apierrors.IsForbidden(err):
		after := deniedRecheckFirst
		if remembered {
			after = min(2*prev.after, deniedRecheckMax)
		} else {
			klog.Warningf("%s in %s is forbidden, so %s; it is asked again in %s, then less and less often, up to once an hour. The host's RBAC lacks it: see docs/embedding.md: %v",
				read, resources.Namespace, deniedWhat[read], after, err)
		}
		d.denied[read] = denial{at: d.clock.Now(), after: after}
		return true, nil
	case err == nil && remembered:
		klog.Infof("%s in %s is allowed again", read, resources.Namespace)
		delete(d.denied, read)
	}
	return false, err
}
