package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
)

// fightManager is the field manager of the writer the fight step plays.
const fightManager = "bench-fight"

// fightRow is a tug-of-war against a controller at the default repair
// budget: another writer sets one of two images every Period for Seconds.
// Ours and Theirs count the DaemonSet template writes of each (the
// controller's from the audit log); Allowed is what the default repair
// budget allows in that time (B(T), RepairPolicy.Bound).
type fightRow struct {
	Seconds float64 `json:"seconds"`
	Period  float64 `json:"periodSeconds"`
	Theirs  int     `json:"theirWrites"`
	Ours    int     `json:"controllerWrites"`
	Allowed int     `json:"allowedByBudget"`
}

// fight runs the tug-of-war against a controller started for it at the
// default repair budget (the drift trials run with --repair-every 1ms),
// then restores the bench's controller.
func (b *bench) fight(ctx context.Context) error {
	b.ctrl.stop()
	var err error
	if b.ctrl, err = b.startControllerWith("fight", b.kubeconfig, append(slices.Clone(makeRunLease), "--resync", defaultResync.String())); err != nil {
		return err
	}
	if err := b.waitSteady(ctx, true); err != nil {
		return err
	}
	const period = 2 * time.Second
	start := time.Now()
	theirs := 0
	for next := start; time.Since(start) < b.o.fightFor; next = next.Add(period) {
		time.Sleep(time.Until(next))
		image := fmt.Sprintf("quay.io/bench/fight:%d", theirs%2)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := b.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Template.Spec.Containers[0].Image = image
			_, err = b.kube.AppsV1().DaemonSets(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: fightManager})
			return err
		})
		if err != nil {
			return fmt.Errorf("the fight's write: %w", err)
		}
		theirs++
	}
	end := time.Now()
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	ours := 0
	for _, e := range b.requestsBetween(start, end) {
		if e.Resource == "daemonsets" && e.Subresource == "" && (e.Verb == "update" || e.Verb == "create") && e.Code < 300 {
			ours++
		}
	}
	b.res.Fight = fightRow{Seconds: end.Sub(start).Seconds(), Period: period.Seconds(), Theirs: theirs, Ours: ours,
		Allowed: runtimeextractor.DefaultRepairPolicy().Bound(end.Sub(start))}
	logf("fight: controller %d writes, the other writer %d, over %.0f s (the budget allows %d)", ours, theirs, end.Sub(start).Seconds(), b.res.Fight.Allowed)

	b.ctrl.stop()
	if b.ctrl, err = b.startController(defaultResync, "after-fight"); err != nil {
		return err
	}
	return b.waitSteady(ctx, true)
}

func (r *results) printFight(w io.Writer) {
	f := r.Fight
	perMin := func(n int) float64 { return float64(n) / f.Seconds * 60 }
	fmt.Fprintf(w, "\nFight: another writer sets the image every %.0f s for %.0f s, the controller at the default repair budget\n", f.Period, f.Seconds)
	fmt.Fprintf(w, "  template writes\tcontroller %d (%.1f per minute), the other writer %d (%.1f per minute); the budget allows %d (6 + ⌈T / 1 min⌉)\n",
		f.Ours, perMin(f.Ours), f.Theirs, perMin(f.Theirs), f.Allowed)
}
