// Command run starts the Insights Operator's binary, patched by the series in
// hack/host/patches, on the local cluster, as the operator's ServiceAccount
// with the RBAC of the patched manifests/, and shows with timings what an
// admin would see: the DaemonSet deployed, a deleted DaemonSet repaired, an
// upgrade whose DaemonSet update admission refuses for 10 s that never
// degrades the insights ClusterOperator, one refused for good that does and
// clears once admitted, and the host's own conditions still written by the
// host. hack/host/check.sh runs it; see docs/embedding.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

const (
	namespace    = testcluster.InsightsNamespace
	operatorSA   = "operator"
	podName      = "insights-operator-local"
	firstVersion = "4.22.0"
	nextVersion  = "4.22.1"
	lastVersion  = "4.22.2"
	frozenPolicy = "host-check-freeze-runtime-extractor"
	rxDegraded   = "RuntimeExtractorDegraded"
	// gatheringDisabled is the host's condition that says gathering is
	// disabled (no token, or by the API).
	gatheringDisabled = "Disabled"
	stepTimeout       = 3 * time.Minute
	// shortRefusal is how long admission refuses the upgrade that must not
	// degrade the operator: well within the library's Degraded inertia.
	shortRefusal = 10 * time.Second
	// hostStatusPeriod is how often the host's status controller writes the
	// ClusterOperator from its sources (pkg/controller/status: its ticker).
	hostStatusPeriod = 2 * time.Minute
	// degradedTimeout bounds the wait for a lasting refusal to show: the
	// library's inertia, then up to one host status period.
	degradedTimeout = runtimeextractor.DefaultDegradedInertia + hostStatusPeriod + time.Minute
	// clearedTimeout bounds the wait for it to clear once admitted: the
	// library's next retry (its backoff has grown during the inertia), then
	// up to one host status period.
	clearedTimeout = runtimeextractor.DefaultRetryMax + hostStatusPeriod + time.Minute
)

// hostManifests are the host's manifests/ files applied as it ships them:
// its namespace, RBAC (with the series' additions), ServiceAccounts and its
// operator CRD and object. Its Deployment is what this command replaces.
var hostManifests = []string{
	"02-namespace.yaml",
	"03-clusterrole.yaml",
	"03-serviceaccount.yaml",
	"03-operator-crd.yaml",
	"04-operator-cr.yaml",
	"04-insightsdatagather-config-cr.yaml",
}

// hostConfig is the operator's --config: the pod's (config/pod.yaml) without
// the endpoints, which nothing here can reach, and with the snapshots in dir.
const hostConfig = `kind: GenericOperatorConfig
apiVersion: operator.openshift.io/v1alpha1
leaderElection:
  disable: true
interval: "2h"
storagePath: %s
endpoint: http://127.0.0.1:1/upload
conditionalGathererEndpoint: http://127.0.0.1:1/gathering_rules
impersonate: system:serviceaccount:openshift-insights:gather
`

func main() {
	binary := flag.String("binary", "", "the patched insights-operator binary")
	hostDir := flag.String("host", "", "the patched host checkout (for its manifests/)")
	keep := flag.Bool("keep", false, "keep the work directory (the host's and the cluster's logs)")
	flag.Parse()
	if *binary == "" || *hostDir == "" {
		fmt.Fprintln(os.Stderr, "usage: run -binary BIN -host DIR")
		os.Exit(2)
	}
	if err := run(*binary, *hostDir, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "host run:", err)
		os.Exit(1)
	}
}

type check struct {
	ctx     context.Context
	cluster *testcluster.Cluster
	kube    kubernetes.Interface
	config  configclient.Interface
	dir     string
	binary  string
	host    *testcluster.Command
	runs    int
}

func run(binary, hostDir string, keep bool) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "host-run-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("the host's logs, and the cluster's, are kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	begin := time.Now()
	cluster, err := testcluster.Start(ctx, testcluster.Options{Nodes: 3, Version: firstVersion, Log: os.Stderr, Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	step("local cluster ready", time.Since(begin))

	c := &check{ctx: ctx, cluster: cluster, kube: cluster.Client(), dir: dir, binary: binary}
	if c.config, err = configclient.NewForConfig(cluster.RESTConfig); err != nil {
		return err
	}
	defer func() { _ = c.stopHost() }()
	if err := c.platform(hostDir); err != nil {
		return err
	}
	for _, s := range []func() error{c.deployed, c.deletedIsRepaired, c.shortRefusal, c.lastingRefusal, c.hostConditions} {
		if err := s(); err != nil {
			if c.host != nil {
				fmt.Fprintf(os.Stderr, "--- the host's log (last 60 lines)\n%s\n", tail(c.host.Log(), 60))
			}
			return err
		}
	}
	return nil
}

// platform installs what the host reads and runs with: the OpenShift config
// objects, the host's manifests, the pull secret (without a cloud.openshift.com
// token, so nothing is uploaded) and the Pod the operator checks it runs in.
func (c *check) platform(hostDir string) error {
	start := time.Now()
	if err := c.cluster.InstallHostPlatform(c.ctx, []string{firstVersion, nextVersion, lastVersion}); err != nil {
		return err
	}
	for _, f := range hostManifests {
		data, err := os.ReadFile(filepath.Join(hostDir, "manifests", f))
		if err != nil {
			return err
		}
		// The cluster emulates the host's SCC with an admission policy
		// (testcluster.InstallSCCPolicy); no API server here serves SCCs.
		if err := c.cluster.ApplyManifests(c.ctx, data, "SecurityContextConstraints"); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	pullSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pull-secret", Namespace: "openshift-config"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}
	if _, err := c.kube.CoreV1().Secrets("openshift-config").Create(c.ctx, pullSecret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pull-secret: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: namespace, Labels: map[string]string{"app": "insights-operator"}},
		Spec: corev1.PodSpec{
			NodeName:   c.cluster.Nodes[0],
			Containers: []corev1.Container{{Name: "insights-operator", Image: "quay.io/openshift/origin-insights-operator:latest"}},
		},
	}
	if _, err := c.kube.CoreV1().Pods(namespace).Create(c.ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the operator's pod: %w", err)
	}
	step("the host's platform objects and manifests/ applied", time.Since(start))
	return nil
}

// startHost runs the binary at version as the host's ServiceAccount.
func (c *check) startHost(version string) error {
	c.runs++
	kubeconfig := filepath.Join(c.dir, fmt.Sprintf("operator-%d.kubeconfig", c.runs))
	if _, err := c.cluster.ServiceAccountKubeconfig(c.ctx, namespace, operatorSA, kubeconfig, time.Hour); err != nil {
		return err
	}
	configPath := filepath.Join(c.dir, "config.yaml")
	snapshots := filepath.Join(c.dir, "snapshots")
	if err := os.MkdirAll(snapshots, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(configPath, fmt.Appendf(nil, hostConfig, snapshots), 0o600); err != nil {
		return err
	}
	images := resources.DefaultImages()
	tag := func(image string) string { return image[:strings.LastIndex(image, ":")+1] + version }
	env := []string{
		"POD_NAME=" + podName, "POD_NAMESPACE=" + namespace, "RELEASE_VERSION=" + version,
		"RELATED_IMAGE_INSIGHTS_RUNTIME_EXTRACTOR=" + tag(images.Extractor),
		"RELATED_IMAGE_INSIGHTS_RUNTIME_EXPORTER=" + tag(images.Exporter),
		"RELATED_IMAGE_KUBE_RBAC_PROXY=" + tag(images.KubeRBACProxy),
	}
	host, err := testcluster.StartCommandWithEnv(fmt.Sprintf("insights-operator-%d", c.runs), c.binary, c.dir, env,
		"start", "--config="+configPath, "--kubeconfig="+kubeconfig, "-v=2")
	if err != nil {
		return err
	}
	c.host = host
	fmt.Printf("  started the host binary (PID %d) at %s as %s\n", host.PID(), version, testcluster.ServiceAccountUser(namespace, operatorSA))
	return nil
}

// stopHost stops the host, and reports an exit of its own before that.
func (c *check) stopHost() error {
	if c.host == nil {
		return nil
	}
	err := c.host.Stop()
	c.host = nil
	return err
}

func (c *check) deployed() error {
	start := time.Now()
	if err := c.startHost(firstVersion); err != nil {
		return err
	}
	ds, err := c.waitDaemonSet("the DaemonSet deployed", func(ds *appsv1.DaemonSet) bool {
		return ds.Annotations[resources.VersionAnnotation] == firstVersion
	})
	if err != nil {
		return err
	}
	step("the DaemonSet deployed after the host's start", time.Since(start))
	fmt.Printf("  %s at version %s, images %s\n", ds.Name, firstVersion, imagesOf(ds))
	if _, err := c.waitOperator("the insights ClusterOperator healthy, with no RuntimeExtractorDegraded", func(co *configv1.ClusterOperator) bool {
		d := condition(co, configv1.OperatorDegraded)
		return d != nil && d.Status == configv1.ConditionFalse && condition(co, rxDegraded) == nil
	}); err != nil {
		return err
	}
	step("the insights ClusterOperator not Degraded", time.Since(start))
	return nil
}

func (c *check) deletedIsRepaired() error {
	ds, err := c.kube.AppsV1().DaemonSets(namespace).Get(c.ctx, resources.DaemonSetName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.kube.AppsV1().DaemonSets(namespace).Delete(c.ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if _, err := c.waitDaemonSet("the deleted DaemonSet repaired", func(got *appsv1.DaemonSet) bool { return got.UID != ds.UID }); err != nil {
		return err
	}
	step("a deleted DaemonSet repaired", time.Since(start))
	return nil
}

// shortRefusal restarts the host at the next version, as an upgrade does,
// while an admission policy refuses every update of the DaemonSet, and admits
// them again 10 s after the first refusal. The insights ClusterOperator is
// watched from the restart until one host status period after the library's
// inertia has passed: it is never Degraded, and never has
// RuntimeExtractorDegraded.
func (c *check) shortRefusal() error {
	if err := c.stopAndFreeze(); err != nil {
		return err
	}
	watch, err := c.watchOperator()
	if err != nil {
		return err
	}
	defer watch.stop()
	start, refused, err := c.upgradeRefused(nextVersion)
	if err != nil {
		return err
	}
	if err := c.sleepUntil(refused.Add(shortRefusal)); err != nil {
		return err
	}
	lifted, err := c.thaw()
	if err != nil {
		return err
	}
	step(fmt.Sprintf("admission refused it for %s, then admitted updates again", shortRefusal), time.Since(refused))
	ds, err := c.waitDaemonSet("the DaemonSet at "+nextVersion, func(ds *appsv1.DaemonSet) bool {
		return ds.Annotations[resources.VersionAnnotation] == nextVersion
	})
	if err != nil {
		return err
	}
	step("the DaemonSet at "+nextVersion+" after the policy's removal", time.Since(lifted))
	fmt.Printf("  %s at version %s, images %s\n", ds.Name, nextVersion, imagesOf(ds))
	until := refused.Add(runtimeextractor.DefaultDegradedInertia + hostStatusPeriod + 10*time.Second)
	if err := c.sleepUntil(until); err != nil {
		return err
	}
	seen := watch.stop()
	step(fmt.Sprintf("watched the insights ClusterOperator from the host's start (%d versions of it)", seen.versions), time.Since(start))
	if len(seen.degraded) > 0 {
		return fmt.Errorf("a refusal of %s degraded the insights ClusterOperator: %s", shortRefusal, strings.Join(seen.degraded, "; "))
	}
	// The host writes the ClusterOperator only when it changes, so the watch
	// shows no write for a status that stayed as it was: the host's own log
	// says whether the source was ever unhealthy (controllerstatus logs each
	// change of health).
	log, err := os.ReadFile(c.host.Log())
	if err != nil {
		return err
	}
	if unhealthy := "name=runtimeextractor healthy=false"; strings.Contains(string(log), unhealthy) {
		return fmt.Errorf("the host's log has %q: the runtime extractor's source was unhealthy", unhealthy)
	}
	if healthy := "name=runtimeextractor healthy=true"; !strings.Contains(string(log), healthy) {
		return fmt.Errorf("the host's log has no %q: the runtime extractor's source never reported", healthy)
	}
	fmt.Println("    the host's log: the runtime extractor's source reported healthy, and never unhealthy")
	fmt.Printf("    never Degraded=True, never %s, for %s after the first refusal\n", rxDegraded, until.Sub(refused).Round(time.Second))
	printConditions(seen.last, configv1.OperatorAvailable, configv1.OperatorProgressing, configv1.OperatorDegraded, rxDegraded)
	return nil
}

// lastingRefusal restarts the host at the last version while updates of the
// DaemonSet are refused until the insights ClusterOperator has
// RuntimeExtractorDegraded, and then admits them: the condition clears. The
// local host has no token, so gathering is disabled (Disabled=True, NoToken):
// by the host's rule for its failures, Degraded stays False meanwhile.
func (c *check) lastingRefusal() error {
	if err := c.stopAndFreeze(); err != nil {
		return err
	}
	_, refused, err := c.upgradeRefused(lastVersion)
	if err != nil {
		return err
	}
	co, err := c.waitOperatorFor("the insights ClusterOperator's RuntimeExtractorDegraded set by the refusal", degradedTimeout, func(co *configv1.ClusterOperator) bool {
		rx := condition(co, rxDegraded)
		return rx != nil && rx.Status == configv1.ConditionTrue
	})
	if err != nil {
		return err
	}
	if d := condition(co, gatheringDisabled); d == nil || d.Status != configv1.ConditionTrue {
		return fmt.Errorf("%s is %v: the local host should gather nothing without a token", gatheringDisabled, d)
	}
	if d := condition(co, configv1.OperatorDegraded); d == nil || d.Status != configv1.ConditionFalse {
		return fmt.Errorf("the operator is Degraded (%v) while gathering is disabled: the host hides its failures then", d)
	}
	step(fmt.Sprintf("%s, after the first refusal (the library's inertia is %s); Degraded=False, gathering disabled", rxDegraded, runtimeextractor.DefaultDegradedInertia), time.Since(refused))
	printConditions(co, configv1.OperatorAvailable, configv1.OperatorDegraded, gatheringDisabled, rxDegraded)

	lifted, err := c.thaw()
	if err != nil {
		return err
	}
	ds, err := c.waitDaemonSetFor("the DaemonSet at "+lastVersion, clearedTimeout, func(ds *appsv1.DaemonSet) bool {
		return ds.Annotations[resources.VersionAnnotation] == lastVersion
	})
	if err != nil {
		return err
	}
	step("the DaemonSet at "+lastVersion+" after the policy's removal (the library's next retry)", time.Since(lifted))
	fmt.Printf("  %s at version %s, images %s\n", ds.Name, lastVersion, imagesOf(ds))
	co, err = c.waitOperatorFor("the insights ClusterOperator clear of it", clearedTimeout, func(co *configv1.ClusterOperator) bool {
		d := condition(co, configv1.OperatorDegraded)
		return d != nil && d.Status == configv1.ConditionFalse && condition(co, rxDegraded) == nil
	})
	if err != nil {
		return err
	}
	step("the condition cleared after the policy's removal", time.Since(lifted))
	printConditions(co, configv1.OperatorAvailable, configv1.OperatorDegraded)
	return nil
}

// stopAndFreeze stops the host and makes admission refuse every update of
// the DaemonSet: the scene of an upgrade that admission refuses.
func (c *check) stopAndFreeze() error {
	if err := c.stopHost(); err != nil {
		return err
	}
	return c.freeze()
}

// upgradeRefused starts the host at version, as an upgrade does, and waits
// for the library to report the refused DaemonSet update. It returns when
// the host was started and when the refusal was seen.
func (c *check) upgradeRefused(version string) (start, refused time.Time, err error) {
	start = time.Now()
	if err = c.startHost(version); err != nil {
		return start, refused, err
	}
	if refused, err = c.waitRefusal(start); err != nil {
		return start, refused, err
	}
	step("the upgrade's DaemonSet update refused, after the host's start", refused.Sub(start))
	return start, refused, nil
}

// freeze makes admission refuse every update of the DaemonSet.
func (c *check) freeze() error {
	policies := c.kube.AdmissionregistrationV1()
	_, err := policies.ValidatingAdmissionPolicies().Create(c.ctx, testcluster.FrozenUpdatesPolicy(frozenPolicy, resources.DaemonSetName), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the admission policy: %w", err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: frozenPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: frozenPolicy, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := policies.ValidatingAdmissionPolicyBindings().Create(c.ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the admission policy binding: %w", err)
	}
	return c.poll("the admission policy enforced", c.updateRefused)
}

// thaw deletes the policy's binding, and returns when admission stopped
// refusing updates.
func (c *check) thaw() (time.Time, error) {
	if err := c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(c.ctx, frozenPolicy, metav1.DeleteOptions{}); err != nil {
		return time.Time{}, err
	}
	err := c.poll("the admission policy lifted", func() (bool, error) { refused, err := c.updateRefused(); return !refused, err })
	return time.Now(), err
}

// waitRefusal waits for the library's Warning that an apply of the DaemonSet
// failed, recorded after since, and returns when it was first seen.
func (c *check) waitRefusal(since time.Time) (time.Time, error) {
	err := c.poll("the library's "+runtimeextractor.ReasonApplyFailed+" Event", func() (bool, error) {
		events, err := c.kube.CoreV1().Events(namespace).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == runtimeextractor.ReasonApplyFailed && e.InvolvedObject.Name == resources.DaemonSetName &&
				!e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
				return true, nil
			}
		}
		return false, nil
	})
	return time.Now(), err
}

// sleepUntil waits until t, and fails at once when the host exits.
func (c *check) sleepUntil(t time.Time) error {
	for time.Now().Before(t) {
		if err := c.host.Exited(); err != nil {
			return err
		}
		time.Sleep(min(time.Second, time.Until(t)))
	}
	return nil
}

// operatorWatch records every version of the insights ClusterOperator that a
// watch delivers.
type operatorWatch struct {
	cancel context.CancelFunc
	done   <-chan struct{}
	seen   operatorSeen
}

type operatorSeen struct {
	versions int
	// degraded describes each version that was Degraded or had
	// RuntimeExtractorDegraded.
	degraded []string
	last     *configv1.ClusterOperator
}

// watchOperator starts a watch of the insights ClusterOperator, resumed when
// the API server closes it.
func (c *check) watchOperator() (*operatorWatch, error) {
	co, err := c.config.ConfigV1().ClusterOperators().Get(c.ctx, testcluster.InsightsOperator, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	lw := cache.NewListWatchFromClient(c.config.ConfigV1().RESTClient(), "clusteroperators", "",
		fields.OneTermEqualSelector("metadata.name", testcluster.InsightsOperator))
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, co.ResourceVersion, lw)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &operatorWatch{cancel: cancel, seen: operatorSeen{last: co}}
	w.done = testcluster.EachEvent(ctx, rw, func(ev watch.Event) {
		if co, isCO := ev.Object.(*configv1.ClusterOperator); isCO {
			w.record(co)
		}
	})
	return w, nil
}

func (w *operatorWatch) record(co *configv1.ClusterOperator) {
	w.seen.versions++
	w.seen.last = co
	for _, t := range []configv1.ClusterStatusConditionType{configv1.OperatorDegraded, rxDegraded} {
		if d := condition(co, t); d != nil && d.Status == configv1.ConditionTrue {
			w.seen.degraded = append(w.seen.degraded, fmt.Sprintf("%s=True [%s] at resourceVersion %s", t, d.Reason, co.ResourceVersion))
		}
	}
}

// stop ends the watch and returns what it saw; later calls return the same.
func (w *operatorWatch) stop() operatorSeen {
	w.cancel()
	<-w.done
	return w.seen
}

// hostConditions shows that the host still writes its own conditions.
func (c *check) hostConditions() error {
	co, err := c.config.ConfigV1().ClusterOperators().Get(c.ctx, testcluster.InsightsOperator, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var missing []string
	for _, t := range []configv1.ClusterStatusConditionType{configv1.OperatorAvailable, configv1.OperatorProgressing, configv1.OperatorDegraded, "Disabled"} {
		if condition(co, t) == nil {
			missing = append(missing, string(t))
		}
	}
	fmt.Println("  the insights ClusterOperator's conditions, and who wrote its status:")
	printConditions(co)
	for _, m := range co.ManagedFields {
		if m.Subresource == "status" {
			fmt.Printf("    status written by %q (%s)\n", m.Manager, m.Operation)
		}
	}
	if len(co.Status.Versions) > 0 {
		fmt.Printf("    versions: %s=%s\n", co.Status.Versions[0].Name, co.Status.Versions[0].Version)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the host's conditions %v are missing", missing)
	}
	return nil
}

// updateRefused reports whether admission refuses a (dry-run) update of the
// DaemonSet.
func (c *check) updateRefused() (bool, error) {
	ds, err := c.kube.AppsV1().DaemonSets(namespace).Get(c.ctx, resources.DaemonSetName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	ds.Labels["host-check.example.com/dry-run"] = "true"
	_, err = c.kube.AppsV1().DaemonSets(namespace).Update(c.ctx, ds, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		return true, nil
	case apierrors.IsConflict(err):
		return false, nil // the controller wrote meanwhile: ask again
	}
	return false, err
}

func (c *check) waitDaemonSet(what string, ok func(*appsv1.DaemonSet) bool) (*appsv1.DaemonSet, error) {
	return c.waitDaemonSetFor(what, stepTimeout, ok)
}

func (c *check) waitDaemonSetFor(what string, timeout time.Duration, ok func(*appsv1.DaemonSet) bool) (*appsv1.DaemonSet, error) {
	return waitObject(c, what, timeout, func() (*appsv1.DaemonSet, error) {
		ds, err := c.kube.AppsV1().DaemonSets(namespace).Get(c.ctx, resources.DaemonSetName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil // not there yet
		}
		return ds, err
	}, ok)
}

func (c *check) waitOperator(what string, ok func(*configv1.ClusterOperator) bool) (*configv1.ClusterOperator, error) {
	return c.waitOperatorFor(what, stepTimeout, ok)
}

func (c *check) waitOperatorFor(what string, timeout time.Duration, ok func(*configv1.ClusterOperator) bool) (*configv1.ClusterOperator, error) {
	got, err := waitObject(c, what, timeout, func() (*configv1.ClusterOperator, error) {
		return c.config.ConfigV1().ClusterOperators().Get(c.ctx, testcluster.InsightsOperator, metav1.GetOptions{})
	}, ok)
	if err != nil && got != nil {
		printConditions(got)
	}
	return got, err
}

// waitObject polls get until ok accepts the object it read, for up to
// timeout, and returns the last object read. get returns nil, nil for an
// object that is not there yet.
func waitObject[T any](c *check, what string, timeout time.Duration, get func() (*T, error), ok func(*T) bool) (*T, error) {
	var got *T
	err := c.pollFor(what, timeout, func() (bool, error) {
		obj, err := get()
		if err != nil || obj == nil {
			return false, err
		}
		got = obj
		return ok(obj), nil
	})
	return got, err
}

// poll checks cond every 100 ms for up to stepTimeout, and fails at once
// when the host exits.
func (c *check) poll(what string, cond func() (bool, error)) error {
	return c.pollFor(what, stepTimeout, cond)
}

func (c *check) pollFor(what string, timeout time.Duration, cond func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(c.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if c.host != nil {
			if err := c.host.Exited(); err != nil {
				return false, err
			}
		}
		return cond()
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func condition(co *configv1.ClusterOperator, t configv1.ClusterStatusConditionType) *configv1.ClusterOperatorStatusCondition {
	for i := range co.Status.Conditions {
		if co.Status.Conditions[i].Type == t {
			return &co.Status.Conditions[i]
		}
	}
	return nil
}

// printConditions prints the conditions of types (all when none).
func printConditions(co *configv1.ClusterOperator, types ...configv1.ClusterStatusConditionType) {
	for _, cond := range co.Status.Conditions {
		if len(types) > 0 && !slices.Contains(types, cond.Type) {
			continue
		}
		msg := cond.Message
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		fmt.Printf("    %s=%s [%s] %s\n", cond.Type, cond.Status, cond.Reason, msg)
	}
}

func imagesOf(ds *appsv1.DaemonSet) string {
	var out []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return strings.Join(out, ", ")
}

func step(what string, took time.Duration) {
	fmt.Printf("%-90s %8s\n", what, took.Round(10*time.Millisecond))
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
