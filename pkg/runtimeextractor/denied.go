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

// A read RBAC denied is asked again after deniedRecheckFirst, then twice as long each time, up to
// deniedRecheckMax: at install RBAC is often bound seconds late; a host's shipped RBAC changes
// only with a release, which restarts it, so the longest wait only delays a grant made by hand.
const (
	deniedRecheckFirst = 30 * time.Second
	deniedRecheckMax   = time.Hour
)

// deniedWhat says what a denial of each read costs, for its log line.
var deniedWhat = map[string]string{
	status.DeniedPodsList:   "RolloutStuck and PodsUnavailable go without node names",
	status.DeniedEventsList: "RolloutStuck goes without the DaemonSet's newest warning (e.g. FailedCreate)",
}

// denials remembers the diagnosis's reads RBAC denied, so a host lacking them (the Insights
// Operator, as shipped) pays one 403 and log line per read, not per diagnosis, and the messages
// say what is missing. Safe for concurrent use.
type denials struct {
	clock clock.PassiveClock

	mu     sync.Mutex
	denied map[string]denial // by read
}

type denial struct {
	at    time.Time     // when RBAC last denied it
	after time.Duration // when it is asked again, after at
}

func newDenials(clk clock.PassiveClock) *denials {
	return &denials{clock: clk, denied: map[string]denial{}}
}

// try runs f, the read named read, unless RBAC denied it and its recheck has not come. denied
// reports a denial, remembered or new; err is any other failure of f, not remembered.
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
