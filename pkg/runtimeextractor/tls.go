package runtimeextractor

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
)

// keptTLS is what the DaemonSet's kube-rbac-proxy had when the TLS profile
// became unknown; ok is false when there was nothing to keep.
type keptTLS struct {
	args []string
	ok   bool
}

// desiredTLS completes d's TLS part from the TLS profile source. While the
// source cannot tell the profile, kube-rbac-proxy keeps the arguments the
// DaemonSet had when that began, so that a slow or denied read never rolls
// every node to another profile (and back once read); a drift of them is
// still repaired. Only with nothing to keep is it Intermediate: nothing is
// downgraded then. Each apply meanwhile records a Warning, which the
// recorder aggregates into one Event whose count shows it lasts. ds is the
// DaemonSet now (nil: none).
func (c *Controller) desiredTLS(d *resources.Desired, ds *appsv1.DaemonSet) {
	if c.tls == nil {
		return
	}
	p, err := c.tls.Profile()
	if err == nil {
		if c.tlsKept != nil {
			klog.Infof("cluster TLS profile known again (%s): kube-rbac-proxy follows it", tlsprofile.Describe(p))
			c.tlsKept = nil
		}
		d.TLSProfile = p
		return
	}
	if c.tlsKept == nil {
		var kept keptTLS
		kept.args, kept.ok = resources.KubeRBACProxyTLSArgsOf(ds)
		c.tlsKept = &kept
	}
	msg := err.Error() + "; "
	switch {
	case c.tlsKept.ok && len(c.tlsKept.args) == 0:
		d.KubeRBACProxyTLSArgs = c.tlsKept.args
		msg += "kube-rbac-proxy keeps the DaemonSet's TLS settings (no TLS arguments) until it is read"
	case c.tlsKept.ok:
		d.KubeRBACProxyTLSArgs = c.tlsKept.args
		msg += "kube-rbac-proxy keeps the DaemonSet's TLS arguments (" + strings.Join(c.tlsKept.args, " ") + ") until it is read"
	default:
		d.TLSProfile = nil
		msg += "no DaemonSet TLS arguments to keep: kube-rbac-proxy gets the Intermediate profile until it is read"
	}
	klog.Warning(msg)
	c.events.tlsUnknown(ds, msg)
}
