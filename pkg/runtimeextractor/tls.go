package runtimeextractor

import (
	"cmp"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
)

// keptTLS is what kube-rbac-proxy keeps while the TLS profile is unknown (!ok: Intermediate), and the message's part.
type keptTLS struct {
	args []string
	ok   bool
	says string
}

// keepTLS keeps only a predefined profile's TLS arguments, or those this controller wrote
// (ds's spec hash is d's with them): an edit made while the controller was down is not adopted.
func keepTLS(ds *appsv1.DaemonSet, d resources.Desired) keptTLS {
	const intermediate = ": kube-rbac-proxy gets the Intermediate profile until it is read"
	args, ok := resources.KubeRBACProxyTLSArgsOf(ds)
	if !ok {
		return keptTLS{says: "no DaemonSet TLS arguments to keep" + intermediate}
	}
	text := cmp.Or(strings.Join(args, " "), "no TLS arguments") // for the messages
	if !resources.PredefinedTLSArgs(args) {
		switch wrote, err := resources.WroteTLSArgs(ds, d, args); {
		case err != nil:
			return keptTLS{says: fmt.Sprintf("the DaemonSet's TLS arguments (%s) are not a predefined profile's, and whether this controller wrote them is unknown (%v)",
				text, err) + intermediate}
		case !wrote:
			return keptTLS{says: "the DaemonSet's TLS arguments (" + text + ") are neither a predefined profile's nor this controller's" + intermediate}
		}
	}
	if len(args) == 0 {
		return keptTLS{args: args, ok: true, says: "kube-rbac-proxy keeps the DaemonSet's TLS settings (no TLS arguments) until it is read"}
	}
	return keptTLS{args: args, ok: true, says: "kube-rbac-proxy keeps the DaemonSet's TLS arguments (" + text + ") until it is read"}
}

// desiredTLS completes d's TLS part from the profile source. While it is unknown, kube-rbac-proxy
// keeps what ds (maybe nil) had: a slow or denied read never rolls every node to another and back.
func (c *Controller) desiredTLS(d *resources.Desired, ds *appsv1.DaemonSet) {
	if c.cfg.tls == nil {
		return
	}
	p, err := c.cfg.tls.Profile()
	if err == nil {
		if c.tlsKept != nil {
			klog.Infof("cluster TLS profile known again (%s): kube-rbac-proxy follows it", tlsprofile.Describe(p))
			c.tlsKept, c.tlsUnknown = nil, ""
		}
		d.TLSProfile = p
		return
	}
	if c.tlsKept == nil {
		kept := keepTLS(ds, *d)
		c.tlsKept = &kept
	}
	if c.tlsKept.ok {
		d.KubeRBACProxyTLSArgs = c.tlsKept.args
	} else {
		d.TLSProfile = nil
	}
	msg := status.CapMessage(err.Error() + "; " + c.tlsKept.says) // the arguments may repeat a suite at any length
	c.tlsUnknown = msg
	klog.Warning(msg)
	c.events.warn(ds, ReasonTLSProfileUnknown, msg)
}
