package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// TestHugeInvalidConfigIsNotQuotedWhole sets config.yaml to a 700 KB value
// where a boolean belongs. The error quotes the value; the condition messages
// and the Events that report it must carry its gist only (capped at about
// 1 KiB; 2 KiB is the bound here).
func TestHugeInvalidConfigIsNotQuotedWhole(t *testing.T) {
	const (
		valueBytes = 700 * 1024
		maxMessage = 2048
	)
	e := newEnv(t)
	_, ds := e.deployed(controllerOpts{})
	since := metav1.NewTime(time.Now().Truncate(time.Second)) // Event times have seconds only
	e.setConfig("dataReporting:\n  disableRuntimeExtractor: " + strings.Repeat("x", valueBytes) + "\n")

	degraded := e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonInvalidConfig)
	if !strings.Contains(degraded.Message, "disableRuntimeExtractor") {
		t.Errorf("Degraded does not name the offending field: %.300q", degraded.Message)
	}
	for _, ct := range status.ConditionTypes {
		c := e.condition(ct)
		if c == nil {
			t.Errorf("%s absent", ct)
			continue
		}
		t.Logf("%s=%s %s: %d bytes", ct, c.Status, c.Reason, len(c.Message))
		if len(c.Message) > maxMessage {
			t.Errorf("%s message is %d bytes, want at most %d: %.200q...", ct, len(c.Message), maxMessage, c.Message)
		}
	}

	// Every Event about the config, the InvalidConfig warning included.
	var about []string
	e.eventually("an InvalidConfig warning", func(context.Context) (bool, error) {
		for _, ev := range e.events("InvalidConfig") {
			if ev.Type == "Warning" && !ev.LastTimestamp.Before(&since) {
				return true, nil
			}
		}
		return false, nil
	})
	list, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Reason != "InvalidConfig" && !strings.Contains(ev.Message, "insights-config") && !strings.Contains(ev.Message, "xxxxxxxx") {
			continue
		}
		about = append(about, ev.Reason)
		if len(ev.Message) > maxMessage {
			t.Errorf("Event %s (%s) message is %d bytes, want at most %d: %.200q...", ev.Name, ev.Reason, len(ev.Message), maxMessage, ev.Message)
		}
	}
	t.Logf("Events about the config, by reason: %v", about)

	if cur := e.daemonSet(); cur == nil || cur.UID != ds.UID || cur.Generation != ds.Generation {
		t.Errorf("the invalid config touched the DaemonSet")
	}
	e.setConfig(enabledConfig)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
}
