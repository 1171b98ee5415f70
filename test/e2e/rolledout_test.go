package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestRolledOutNeedsThePods checks the two waits the other tests rely on
// when they delete a DaemonSet and expect the next one of its name to roll
// out, as the repair tests do with the controller's:
//
//   - 20 times, a DaemonSet is deleted the moment rolledOut holds for it and
//     created again at once. With rolledOut reading the status alone, some
//     rounds saw a new DaemonSet carrying the old one's counts (written onto
//     it by kube-controller-manager), deleted it while its pods were being
//     created, and the next one got no pod for the 5 minutes of the DaemonSet
//     controller's expectations: round 4 failed so in one run, and 2 rounds
//     of 9 in another. The polls that met such a status are counted.
//   - Then a DaemonSet is deleted just after its creation, on purpose, and
//     after waitDaemonSetControllerDone (what reset does between tests) the
//     next one rolls out. Waiting only for the old pods to be gone was not
//     enough: 1 run of 3 got no pod for the next DaemonSet.
func TestRolledOutNeedsThePods(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const probe = "rolledout-probe"
	labels := map[string]string{"app": probe}
	client := e.kube.AppsV1().DaemonSets(ns)
	create := func() types.UID {
		t.Helper()
		ds, err := client.Create(ctx, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: probe, Namespace: ns},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example/probe:1"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.UID
	}
	remove := func() {
		t.Helper()
		if err := client.Delete(ctx, probe, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	aheadOfPods := 0
	waitRolledOut := func(what string, uid types.UID) {
		t.Helper()
		var last *appsv1.DaemonSet
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
			ds, err := client.Get(ctx, probe, metav1.GetOptions{})
			if err != nil || ds.UID != uid {
				return false, nil
			}
			last = ds
			// rolledOut's two halves, so the pods are listed once a poll.
			byStatus, byPods := e.statusRolledOut(ds), e.readyOnEveryNode(ds)
			if byStatus && !byPods {
				aheadOfPods++
			}
			return byStatus && byPods, nil
		})
		if err != nil {
			e.logRollout(last)
			t.Fatalf("%s: the DaemonSet (uid %s) did not roll out: %v", what, uid, err)
		}
	}
	t.Cleanup(func() {
		_ = client.Delete(ctx, probe, metav1.DeleteOptions{})
		e.waitDaemonSetControllerDone(probe)
	})

	uid := create()
	for round := range 20 {
		waitRolledOut("round "+strconv.Itoa(round), uid)
		remove()
		uid = create()
	}
	waitRolledOut("the last round", uid)
	t.Logf("20 deletes and creates rolled out; polls that saw the status ahead of the pods: %d", aheadOfPods)

	remove()
	create()
	remove()
	e.waitDaemonSetControllerDone(probe)
	waitRolledOut("a DaemonSet after one deleted while its pods were being created", create())
}
