package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"github.com/openshift/library-go/pkg/controller/fileobserver"
	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/openshift/library-go/pkg/serviceability"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	kversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Leader election. The Lease timings are library-go's: its ControllerBuilder
// picks them by the control-plane topology (the Infrastructure "cluster"), but
// only when none is set, so the --leader-elect-* flags default to zero and set
// them only when given. The identity is the pod's name: ControllerCommandConfig
// cannot pass one to the ControllerBuilder it makes, so the command's Run makes
// the builder itself (leaderCommand).

// What --help says of the --leader-elect-* defaults: library-go's values
// (LeaderElectionDefaulting, LeaderElectionSNOConfig).
const (
	leaseDefault = "2m17s, 4m30s on a single-replica control plane"
	renewDefault = "1m47s, 4m0s on a single-replica control plane"
	retryDefault = "26s, 1m0s on a single-replica control plane"
)

// podNameEnv names the pod the process runs in; the Deployment sets it from
// the downward API. library-go reads it too, to attach Events to the
// Deployment.
const podNameEnv = "POD_NAME"

// leaseIdentity is the Lease holder identity. In a pod it is the pod's name:
// a container restarted in the same pod finds the Lease it held and renews it
// at once, where a fresh identity would wait for it to expire; another pod
// still waits. Outside a pod it is empty, and library-go makes a unique one
// (hostname and a UUID), so two processes on one machine never share it.
func leaseIdentity(getenv func(string) string) string {
	return strings.TrimSpace(getenv(podNameEnv))
}

// leaderCommand is what the command's Run needs: controllercmd's config
// (flags, config file, serving certificate) and what it keeps private.
type leaderCommand struct {
	cc            *controllercmd.ControllerCommandConfig
	componentName string
	start         controllercmd.StartFunc
	info          kversion.Info
	clock         clock.Clock
}

// run replaces the Run of controllercmd's command. It keeps what that Run
// does (logs, OPENSHIFT_ON_PANIC and OPENSHIFT_PROFILE, SIGTERM and SIGINT,
// --terminate-on-files) and starts the controller with the identity.
func (l *leaderCommand) run(ctx context.Context) func(*cobra.Command, []string) {
	return func(cmd *cobra.Command, _ []string) {
		logs.InitLogs()
		defer logs.FlushLogs()
		defer serviceability.BehaviorOnPanic(os.Getenv("OPENSHIFT_ON_PANIC"), l.info)()
		defer serviceability.Profile(os.Getenv("OPENSHIFT_PROFILE")).Stop()
		serviceability.StartProfiler()

		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// A first signal stops the controller cleanly (the Lease is released);
		// a second one exits at once.
		stop := server.SetupSignalHandler()
		go func() {
			select {
			case <-stop:
				klog.Info("Received SIGTERM or SIGINT signal, shutting down controller.")
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := terminateOnFiles(ctx, cmd.Flags(), cancel); err != nil {
			klog.Fatal(err)
		}
		if err := l.startController(ctx, cmd.Flags()); err != nil {
			klog.Fatal(err)
		}
	}
}

// fileCheckInterval is how often --terminate-on-files are hashed, as in
// controllercmd; its test shortens it.
var fileCheckInterval = 10 * time.Second

// terminateOnFiles cancels the controller's context when a file named by
// --terminate-on-files changes.
func terminateOnFiles(ctx context.Context, flags *pflag.FlagSet, cancel context.CancelFunc) error {
	files, err := flags.GetStringArray("terminate-on-files")
	if err != nil || len(files) == 0 {
		return err
	}
	obs, err := fileobserver.NewObserver(fileCheckInterval)
	if err != nil {
		return err
	}
	initial := map[string][]byte{}
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			klog.Warningf("read %s (a later change still stops the controller): %v", f, err)
			continue
		}
		initial[f] = content
	}
	obs.AddReactor(func(file string, _ fileobserver.ActionType) error {
		klog.Infof("exiting because %q changed", file)
		cancel()
		return nil
	}, initial, files...)
	go obs.Run(ctx.Done())
	return nil
}

// startController is controllercmd's StartController with the identity: the
// config file, the serving certificate (self-signed when none is mounted, and
// a restart when one appears), leader election, /metrics and the probes.
func (l *leaderCommand) startController(ctx context.Context, flags *pflag.FlagSet) error {
	cc := l.cc
	unstructured, config, raw, err := cc.Config()
	if err != nil {
		return err
	}
	initial, watched, err := cc.AddDefaultRotationToConfig(config, raw)
	if err != nil {
		return err
	}
	str := func(name string) string {
		if f := flags.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	if listen := str("listen"); listen != "" {
		config.ServingInfo.BindAddress = listen
	}
	namespace := str("namespace")

	// A new serving certificate ends the process; the kubelet restarts it.
	restart := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-restart:
			cancel()
		case <-ctx.Done():
		}
	}()

	identity := leaseIdentity(os.Getenv)
	// Zero timings (no flag given) leave the choice to the builder.
	le := config.LeaderElection
	le.Disable = cc.DisableLeaderElection
	le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = cc.LeaseDuration, cc.RenewDeadline, cc.RetryPeriod

	b := controllercmd.NewController(l.componentName, l.start, l.clock).
		WithKubeConfigFile(str("kubeconfig"), nil).
		WithComponentNamespace(namespace).
		WithLeaderElection(le, namespace, l.componentName+"-lock").
		WithInstanceIdentity(identity).
		WithVersion(l.info).
		WithEventRecorderOptions(events.RecommendedClusterSingletonCorrelatorOptions()).
		WithRestartOnChange(restart, initial, watched...).
		WithComponentOwnerReference(cc.ComponentOwnerReference)
	if !cc.DisableServing {
		b = b.WithServer(config.ServingInfo, config.Authentication, config.Authorization)
		if cc.EnableHTTP2 {
			b = b.WithHTTP2()
		}
	}
	if cc.TopologyDetector != nil {
		b = b.WithTopologyDetector(cc.TopologyDetector)
	}
	if identity != "" {
		klog.Infof("leader election identity %q (from %s)", identity, podNameEnv)
	}
	if err := b.Run(ctx, unstructured); err != nil {
		return fmt.Errorf("run controller: %w", err)
	}
	return nil
}
