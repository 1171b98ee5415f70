package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// The scale group runs the same measurements on two fresh clusters, one of
// -scale-small nodes and one of -scale-nodes, in the same run: the first
// rollout, a version change's rolling update (maxUnavailable 33%: about
// three waves), drift-delete repairs against the floor, and the
// controller's requests, CPU seconds and peak RSS over each rollout. The
// main cluster is stopped first, so the two cores are the scale cluster's.

const (
	// scaleTimeout bounds every wait on a scale cluster: a thousand pods
	// roll out in minutes on two cores, not seconds.
	scaleTimeout = 15 * time.Minute
	// sampleEvery is how often the controller's CPU seconds and RSS are read
	// (from /proc, not /metrics) during a rollout.
	sampleEvery = time.Second
	// scrapeEvery is how often /metrics is scraped during a rollout, as the
	// ServiceMonitor of manifests/ has Prometheus do. A scrape allocates in
	// the controller (every metric family, gzipped): at the sampling rate it
	// was most of a large rollout's allocation, and so most of its heap
	// growth, 30 times what production adds.
	scrapeEvery = 30 * time.Second
)

// scaleRun is one cluster size's figures.
type scaleRun struct {
	Nodes         int     `json:"nodes"`
	NodesReadyS   float64 `json:"clusterStartSeconds"` // start, nodes Ready included
	FirstRunningS float64 `json:"firstApplyToRunningSeconds"`
	FirstRollout  usage   `json:"firstRollout"`
	UpgradeS      float64 `json:"versionChangeToRunningSeconds"`
	UpgradeWaves  int     `json:"upgradeWaves"` // distinct batches of pods replaced, as the DaemonSet's status showed
	// VersionWrites: DaemonSet writes of the controller that still runs the
	// old release, between the version change and its record on the
	// DaemonSet (an annotation, which replaces no pod).
	VersionWrites  float64     `json:"versionOnlyDaemonSetWrites"`
	Upgrade        usage       `json:"upgradeRollout"`
	IdleRSSBytes   int64       `json:"idleRssBytes"` // Running, nothing happening
	DriftP50Ms     float64     `json:"driftDeleteP50Ms"`
	FloorP50Ms     float64     `json:"floorP50Ms"`
	DriftRatio     float64     `json:"driftDeleteP50FloorRatio"`
	DriftSamples   int         `json:"driftSamples"`
	DriftSamplesMs []float64   `json:"driftSamplesMs"`
	FloorSamplesMs []float64   `json:"floorSamplesMs"`
	DriftRequests  counts      `json:"driftRequestsPerTrial"`
	Memory         scaleMemory `json:"memory"`
}

// usage is what the controller cost over one rollout window.
type usage struct {
	Seconds    float64  `json:"seconds"`
	Requests   counts   `json:"requests"`
	ByResource []string `json:"byResource"` // "verb resource ×n"
	// PerPodOrNode is requests on pods or nodes: 0 unless the controller
	// looks at pods or nodes one by one (or lists them).
	PerPodOrNode int     `json:"podOrNodeRequests"`
	StatusPer5s  float64 `json:"statusWritesPer5s"`
	CPUSeconds   float64 `json:"cpuSeconds"`
	PeakRSSBytes int64   `json:"peakRssBytes"`
}

// scale runs the scale group: the small size, then the large one.
func (b *bench) scale(ctx context.Context) error {
	if b.o.scaleNodes <= 0 {
		logf("scale: skipped (-scale-nodes 0)")
		return nil
	}
	// Free the machine: the main cluster has done its part.
	if b.ctrl != nil {
		b.ctrl.stop()
		b.ctrl = nil
	}
	if b.ds != nil {
		b.ds.stop()
		b.ds = nil
	}
	if b.cluster != nil {
		if err := b.cluster.Stop(); err != nil {
			return fmt.Errorf("stop the main cluster: %w", err)
		}
	}
	sizes := []int{b.o.scaleSmall, b.o.scaleNodes}
	if b.o.scaleLargest > b.o.scaleNodes {
		sizes = append(sizes, b.o.scaleLargest)
	}
	for _, n := range sizes {
		r, err := b.scaleOnce(ctx, n)
		if err != nil {
			if ctx.Err() != nil || n == b.o.scaleSmall {
				return fmt.Errorf("%d nodes: %w", n, err)
			}
			// The machine may not hold the large size: say so, keep the rest.
			b.res.note("scale: %d nodes failed: %v", n, err)
			logf("scale: %d nodes failed: %v", n, err)
			continue
		}
		b.res.Scale = append(b.res.Scale, r)
	}
	return nil
}

// scaleOnce measures one size on a fresh cluster, stopped at the end.
func (b *bench) scaleOnce(ctx context.Context, nodes int) (scaleRun, error) {
	work := filepath.Join(b.work, fmt.Sprintf("scale-%d", nodes))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return scaleRun{}, fmt.Errorf("create work dir: %w", err)
	}
	// POD_NAME as the shipped Deployment sets it: library-go then looks its
	// pod up by name (one get) instead of listing every pod of the namespace.
	s := &bench{o: b.o, work: work, binary: b.binary, res: newResults(b.o), timeout: scaleTimeout,
		env: []string{"POD_NAME=runtime-extractor-controller-bench"}}
	co := testcluster.Options{Nodes: nodes, ControlPlaneQPS: float32(b.o.scaleQPS)}
	if err := s.startCluster(ctx, co, 10*time.Minute); err != nil {
		return scaleRun{}, err
	}
	defer s.tearDown()
	r := scaleRun{Nodes: nodes, NodesReadyS: round1(s.cluster.StartupDuration.Seconds())}
	logf("scale: %d nodes Ready, cluster started in %s", nodes, s.cluster.StartupDuration.Round(100*time.Millisecond))

	// First apply: process start -> Running with a pod available on every node.
	start := time.Now()
	var err error
	if s.ctrl, err = s.startController(defaultResync, "scale"); err != nil {
		return r, err
	}
	var startGo goMemory
	if r.Memory.StartRSSBytes, startGo, err = s.startRSS(ctx); err != nil {
		return r, fmt.Errorf("the controller's first /metrics: %w", err)
	}
	r.Memory.setGo("start", startGo)
	smp := s.sample(ctx)
	smp.fromZero()
	if err := s.waitSteady(ctx, true); err != nil {
		smp.stop()
		return r, err
	}
	running := time.Now()
	r.FirstRunningS = round1(running.Sub(start).Seconds())
	if r.FirstRollout, err = s.usage(ctx, smp, start, running); err != nil {
		return r, err
	}
	logf("scale: %d nodes: first apply Running after %.1f s", nodes, r.FirstRunningS)

	idle, err := s.sampleMemory(ctx, "idle")
	if err != nil {
		return r, err
	}
	r.IdleRSSBytes = idle.RSSBytes
	if idle.Go.LiveAfterGCBytes, err = s.liveHeap(ctx); err != nil {
		return r, err
	}
	r.Memory.setGo("idle", idle.Go)

	if err := s.scaleUpgrade(ctx, &r); err != nil {
		return r, err
	}
	logf("scale: %d nodes: version change Running after %.1f s (%d waves)", nodes, r.UpgradeS, r.UpgradeWaves)
	upgraded, err := s.sampleMemory(ctx, "upgraded")
	if err != nil {
		return r, err
	}
	r.Memory.UpgradedRSSBytes = upgraded.RSSBytes
	r.Memory.setGo("upgraded", upgraded.Go)
	if err := s.scaleDiagnosis(ctx, &r.Memory); err != nil {
		return r, err
	}
	// Lift the hold, so that the drift trials start from a rolled-out DaemonSet.
	if err := s.cluster.HoldPods(ctx); err != nil {
		return r, fmt.Errorf("lift the hold: %w", err)
	}
	if err := s.waitSteady(ctx, true); err != nil {
		return r, err
	}
	if err := s.scaleDrift(ctx, &r); err != nil {
		return r, err
	}
	logf("scale: %d nodes: drift-delete p50 %.1f ms, floor %.1f ms", nodes, r.DriftP50Ms, r.FloorP50Ms)
	return r, nil
}

// scaleUpgrade does what an OpenShift upgrade does to the controller, in its
// order: the ClusterVersion moves while the old operator still runs, which
// records the version on the DaemonSet (an annotation: no pod rolls); then
// the operator restarts with the new release's images (RELATED_IMAGE_*), which
// roll every pod. It waits for the first step's write before the restart, so
// that the rollout's window holds the new release's writes alone (without the
// wait, the old process's write races its stop, and the window holds it in
// some runs only). It times the version change to Running after the rolling
// update of every pod.
func (b *bench) scaleUpgrade(ctx context.Context, r *scaleRun) error {
	before, _ := b.ds.current()
	if before == nil {
		return errors.New("no DaemonSet before the version change")
	}
	const version = "4.22.99"
	images := resources.DefaultImages()
	tag := func(img string) string { return strings.TrimSuffix(img, ":latest") + ":" + version }
	newExtractor := tag(images.Extractor)
	start, err := b.setVersion(ctx, version)
	if err != nil {
		return err
	}
	if _, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Annotations[resources.VersionAnnotation] == version
	}); err != nil {
		return fmt.Errorf("wait for the old process to record the version: %w", err)
	}
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	restarted := time.Now()
	r.VersionWrites = tallyRequests(b.requestsBetween(start, restarted)).c.DaemonSet.Writes
	b.ctrl.stop()
	b.env = append(b.env,
		resources.EnvExtractorImage+"="+newExtractor,
		resources.EnvExporterImage+"="+tag(images.Exporter),
		resources.EnvKubeRBACProxyImage+"="+tag(images.KubeRBACProxy))
	if b.ctrl, err = b.startController(defaultResync, "scale-upgrade"); err != nil {
		return err
	}
	var startGo goMemory
	if r.Memory.UpgradeStartRSSBytes, startGo, err = b.startRSS(ctx); err != nil {
		return fmt.Errorf("the restarted controller's first /metrics: %w", err)
	}
	r.Memory.setGo("upgradeStart", startGo)
	smp := b.sample(ctx)
	smp.fromZero() // a new process: its CPU counter started at 0
	// Waves: count each time pods go unavailable after all were back.
	var waves waveCounter
	if _, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool {
		upgraded := ds != nil && ds.Generation > before.Generation && testcluster.ExtractorImage(ds) == newExtractor
		if upgraded {
			waves.observe(ds)
		}
		return upgraded && b.rolledOut(ds)
	}); err != nil {
		smp.stop()
		return fmt.Errorf("wait for the upgrade rollout: %w", err)
	}
	if err := b.waitState(ctx, "Running"); err != nil {
		smp.stop()
		return err
	}
	done := time.Now()
	r.UpgradeS = round1(done.Sub(start).Seconds())
	r.UpgradeWaves = waves.n
	r.Upgrade, err = b.usage(ctx, smp, restarted, done)
	return err
}

// waveCounter counts rolling-update waves: a wave starts when pods are
// taken down (available drops) after the previous one came back up.
type waveCounter struct {
	n    int
	down bool
}

func (w *waveCounter) observe(ds *appsv1.DaemonSet) {
	unavailable := ds.Status.NumberUnavailable > 0 || ds.Status.NumberAvailable < ds.Status.DesiredNumberScheduled
	if unavailable && !w.down {
		w.n++
	}
	w.down = unavailable
}

// scaleDrift deletes the DaemonSet and times its return, controller and
// floor in alternate blocks. The deletion orphans the pods (they stay, and
// the new DaemonSet adopts them): a background deletion would make every
// sample a full replacement of every pod, minutes at a thousand nodes. A
// sample runs from the bench's watch seeing the deletion to it seeing the
// new object, the controller's reaction alone: an orphaning deletion first
// waits for the garbage collector to release every pod, which would weigh
// on both alike and hide the difference.
func (b *bench) scaleDrift(ctx context.Context, r *scaleRun) error {
	product, floor, w, err := b.interleaved(ctx, fmt.Sprintf("scale-%d-drift", r.Nodes), b.o.scaleBlocks, b.o.scaleTrials, b.orphanDeleteAndTime)
	if err != nil {
		return err
	}
	b.res.addLatency(keyDriftDelete, "", product)
	b.res.addLatency(keyFloor, "", floor)
	b.res.finish()
	l, f := b.res.latency(keyDriftDelete), b.res.latency(keyFloor)
	r.DriftSamples, r.DriftP50Ms, r.FloorP50Ms, r.DriftRatio = l.N, l.P50Ms, f.P50Ms, l.P50Floor
	r.DriftSamplesMs, r.FloorSamplesMs = l.SamplesMs, f.SamplesMs
	if err := b.count(ctx, keyDriftDelete, "drift: DaemonSet deleted (orphaning)", repairTarget, w, false); err != nil {
		return err
	}
	r.DriftRequests = b.res.requestRow(keyDriftDelete).PerTrial
	return nil
}

// orphanDeleteAndTime deletes the DaemonSet, leaving its pods, and returns
// the time from the watch seeing it gone to the watch seeing a new one.
// With w, the deletion starts a trial's window.
func (b *bench) orphanDeleteAndTime(ctx context.Context, w *windows) (time.Duration, error) {
	old, _ := b.ds.current()
	if old == nil {
		return 0, errors.New("no DaemonSet to delete")
	}
	if w != nil {
		w.begin()
	}
	orphan := metav1.DeletePropagationOrphan
	if err := b.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &old.UID}, PropagationPolicy: &orphan,
	}); err != nil {
		return 0, fmt.Errorf("delete the DaemonSet: %w", err)
	}
	gone, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds == nil || ds.UID != old.UID })
	if err != nil {
		return 0, fmt.Errorf("wait for the DaemonSet to go: %w", err)
	}
	back, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
	if err != nil {
		return 0, fmt.Errorf("wait for the DaemonSet to be recreated: %w", err)
	}
	return back.Sub(gone), nil
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
