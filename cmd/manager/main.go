// Command manager runs the node-healthcheck operator: one controller-runtime manager with one shared
// cache, leader election, health and readiness probes, a secure metrics endpoint and the admission
// webhook server. It runs in a pod, or out of cluster with --kubeconfig.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/opsettings"
	"github.com/medik8s/node-healthcheck/internal/plumbing/metricsauth"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/plumbing/webhookcert"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// gracefulShutdownTimeout bounds how long runnables get to stop after SIGTERM; well inside the
// 30s a pod gets by default, so the leader lease is released before the kubelet kills the process.
const gracefulShutdownTimeout = 20 * time.Second

// options are the manager's command-line settings. The flag names are an interface: the chart, the
// docs and users' scripts use them.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionID string
	leaderElectionNS string
	webhookPort      int
	webhookCertDir   string
	enableWebhooks   bool
	enableHTTP2      bool
	leaseNamespace   string
	// release labels the node leases the operator creates (lease.ReleaseLabel).
	release string
	// shutdownDelay is how long the manager keeps serving after SIGTERM (shutdown.go).
	shutdownDelay time.Duration
	// leaseDuration, renewDeadline and retryPeriod tune leader election.
	leaseDuration, renewDeadline, retryPeriod time.Duration

	upgrade controller.UpgradeOptions
	// returnGrace is the returning-node hold.
	returnGrace time.Duration
	// removalHold bounds how long a node's removal holds its remediation back.
	removalHold time.Duration
	// maxClockSkew bounds the skew between the manager's clock and the API server's; 0: no bound.
	maxClockSkew time.Duration
	// conditionTimeBound bounds how far a node condition's lastTransitionTime may be from the
	// manager's view of it; 0: maxClockSkew's value (10s when that is off); negative: no bound.
	conditionTimeBound time.Duration
	// selfManagedCerts is set when the operator manages its webhook certificate (no cert-manager).
	selfManagedCerts *webhookcert.Options
	zap              zap.Options
	// printVersion prints the version and exits.
	printVersion bool
	// settingsConfigMap, when set, is the ConfigMap the leader publishes its settings in.
	settingsConfigMap *types.NamespacedName
}

// DefaultReturnGrace is --returning-node-grace's default: the node lifecycle controller's default
// --node-monitor-grace-period (50s) and a margin.
const DefaultReturnGrace = health.DefaultReturnGrace

// DefaultRemovalHold is --removal-hold's default (health.DefaultRemovalHold).
const DefaultRemovalHold = health.DefaultRemovalHold

// DefaultMaxClockSkew is --max-clock-skew's default, 10s. Time-synchronised clocks agree within
// milliseconds, so a skew of 10s means the synchronisation is broken, while 10s is small against
// the durations decisions measure with the manager's clock against other clocks' times (unhealthy
// conditions last 300s by default, escalation steps time out after a minute at least, the
// returning-node hold is a minute), which a skew within it shortens or stretches by at most 10s. It
// is ten times the Date header's one-second resolution, so the measurement decides clearly on
// either side of it.
const DefaultMaxClockSkew = 10 * time.Second

// minClockSkew is the smallest bound accepted: the Date header tells the API server's time to
// the second, so after one response the skew is known within half a second at best.
const minClockSkew = time.Second

// leaseNamespaceEnv is how the public operator is told the lease namespace; the flag overrides it.
const leaseNamespaceEnv = "LEASE_NAMESPACE"

func parseFlags(fs *flag.FlagSet, args []string) (*options, error) {
	o := &options{zap: zap.Options{Development: false}}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to, for example :8443 (HTTPS) or :8080 (with --metrics-secure=false). \"0\" disables metrics.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS and require an authenticated, authorized client (TokenReview and SubjectAccessReview). False serves plain HTTP, for local use only.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0",
		"Address Go's pprof endpoints (/debug/pprof/) bind to, for example localhost:6060, to profile memory and CPU. \"0\" (the default) disables them; they have no authentication.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081",
		"Address the health (/healthz) and readiness (/readyz) probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true,
		"Elect a leader so that only one replica acts at a time. Disable only when a single replica runs.")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second,
		"How long a standby waits, after the leader's last renewal, before it takes over (a crashed leader is replaced within about this plus two retry periods).")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second,
		"How long the leader keeps retrying to renew before it gives up leadership (and exits); shorter than the lease duration.")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second,
		"How often leader election acts: the leader renews and standbys try to acquire.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "e1f13584.medik8s.io",
		"Name of the Lease used for leader election: the public Node Healthcheck operator's by default, so that in one namespace the two never lead at once.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader-election Lease. Defaults to the pod's namespace in cluster; required out of cluster when --leader-elect is on.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443,
		"Port the admission webhook server listens on.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "",
		"Folder holding the webhook server's certificate as tls.crt and tls.key; reloaded when they change. Defaults to <temp dir>/k8s-webhook-server/serving-certs.")
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true,
		"Serve the defaulting and validating admission webhooks. Without them the CRD's CEL rules still refuse most invalid specs.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 on the metrics and webhook servers. Off by default to avoid the HTTP/2 stream-reset and rapid-reset vulnerabilities.")
	leaseNamespace := lease.DefaultNamespace
	if env := os.Getenv(leaseNamespaceEnv); env != "" {
		leaseNamespace = env // the public operator's setting, so its deployments keep working
	}
	fs.StringVar(&o.leaseNamespace, "lease-namespace", leaseNamespace,
		"Namespace of the node leases taken before remediating a node (created if missing); other operators that touch nodes coordinate through them. Defaults to $"+leaseNamespaceEnv+" when set.")
	fs.StringVar(&o.release, "release-identity", "",
		"Identity of this installation, written as the label "+lease.ReleaseLabel+" on the node leases the operator creates, so that `manager cleanup --release-identity` at its uninstall deletes only its own leases in a lease namespace other releases and operators share (the chart sets it from the release's namespace and name). A label value: at most 63 characters. Empty: no label, and no cleanup deletes them.")
	fs.BoolVar(&o.upgrade.ClusterAPI, "upgrade-detect-cluster-api", false,
		"Start no new remediation while a Cluster API KubeadmControlPlane or MachineDeployment rolls out.")
	fs.BoolVar(&o.upgrade.NodeRollout, "upgrade-detect-node-rollout", false,
		"Start no new remediation in a NodeHealthCheck while its nodes run kubelets of different minor versions and one of them is cordoned (a node-by-node upgrade).")
	var pauseObject string
	fs.StringVar(&pauseObject, "upgrade-pause-object", "",
		"<namespace>/<name> of a ConfigMap or Lease whose existence pauses new remediations in every NodeHealthCheck: the hook for upgrade tools. A Lease with leaseDurationSeconds pauses only until it expires; --upgrade-max-pause does not end this pause.")
	fs.DurationVar(&o.upgrade.MaxPause, "upgrade-max-pause", 0,
		"Resume remediation, with a warning event, once each upgrade signal has held it back this long (for example 6h), measured per signal from when it began; a new signal pauses again. The pause object is not bounded. 0: no limit.")
	fs.DurationVar(&o.returnGrace, "returning-node-grace", DefaultReturnGrace,
		"While a NodeHealthCheck's healthy-node threshold holds only by counting nodes that came back (turned healthy) less than this ago, start no new remediation in it: after an outage, the nodes still unhealthy are likely coming back too. A pool whose threshold holds without them, or an isolated failure, is not delayed. At least the node lifecycle's --node-monitor-grace-period (50s by default) is advised. 0: off.")
	fs.DurationVar(&o.removalHold, "removal-hold", DefaultRemovalHold,
		"Where a NodeHealthCheck sets spec.skipNodesBeingRemoved, a node being removed (its deletion, the cluster autoscaler's or Karpenter's taint) gets no new remediation and its running one does not escalate, for at most this long from when the removal began: a removal that never completes (a stuck drain or finalizer) then holds a broken node no longer, with an event. 0: no bound.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", DefaultShutdownDelay,
		"How long to keep serving (the admission webhooks above all) after SIGTERM before stopping, so that the API server's calls that still reach this pod while its Services' endpoints and kube-proxy's rules catch up are answered. 0: stop at once.")
	fs.DurationVar(&o.conditionTimeBound, "condition-time-bound", 0,
		"A node condition whose lastTransitionTime is later than the manager's clock, earlier than the node's creation, or, at a change the manager's watch showed, earlier than that moment or the condition's heartbeat by more than this is not trusted: it counts from when the manager saw it change (a kubelet's or node-problem-detector's clock that runs slow would make a short blip count as the whole duration at once). Reported in the ConditionTimesUntrusted condition. 0: --max-clock-skew's value (10s when that is 0); negative: every time is trusted (node simulators that backdate conditions).")
	fs.DurationVar(&o.maxClockSkew, "max-clock-skew", DefaultMaxClockSkew,
		"Start no new remediation (nor escalation) while the manager's clock differs from the API server's by more than this, measured from the Date header of API responses: decisions compare the manager's clock with times the control plane wrote, so a clock minutes ahead would remediate a node that is unready for a moment. Reported in a condition, an event and the metric nodehealthcheck_clock_skew_seconds. Synchronised clocks agree within milliseconds, and 10s is small against the durations decisions measure (conditions of 300s by default). At least 1s (the Date header's resolution); 0: no bound (the skew is still measured and exported).")
	var certSecret, webhookService, webhookConfigs string
	fs.StringVar(&certSecret, "webhook-cert-secret", "",
		"<namespace>/<name> of a Secret in which the operator keeps its own webhook CA and certificate, renewed before they expire, for clusters without cert-manager. Mount the Secret at --webhook-cert-dir; needs --webhook-service and --webhook-configurations.")
	fs.StringVar(&webhookService, "webhook-service", "",
		"<namespace>/<name> of the webhook Service: the self-managed certificate is valid for <name>.<namespace>.svc.")
	fs.StringVar(&webhookConfigs, "webhook-configurations", "",
		"<mutating>,<validating>: names of the webhook configurations into which the self-managed CA is written.")
	var certValidity, caValidity time.Duration
	fs.DurationVar(&certValidity, "webhook-cert-validity", webhookcert.DefaultCertValidity,
		"Lifetime of the self-managed serving certificate (with --webhook-cert-secret); it is renewed when a quarter of it is left, which must leave the kubelet time to mount the renewal (under 1h the operator logs a warning).")
	fs.DurationVar(&caValidity, "webhook-ca-validity", webhookcert.DefaultCAValidity,
		"Lifetime of the self-managed CA; renewed, like the certificate, when a quarter of the certificate's lifetime is left. The previous CA stays trusted until it expires, so renewals never interrupt admission.")
	var settingsConfigMap string
	fs.StringVar(&settingsConfigMap, "settings-configmap", "",
		"<namespace>/<name> of a ConfigMap (which must exist; the chart creates it) in which the leader publishes the settings kubectl nhc explain needs to decide as the operator does: --lease-namespace, --returning-node-grace, --max-clock-skew and the version. Empty: not published.")
	fs.BoolVar(&o.printVersion, "version", false,
		"Print the version (the chart's appVersion the image was built for) and exit.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if settingsConfigMap != "" {
		key, err := namespacedName("--settings-configmap", settingsConfigMap)
		if err != nil {
			return nil, err
		}
		o.settingsConfigMap = &key
	}
	if pauseObject != "" {
		key, err := namespacedName("--upgrade-pause-object", pauseObject)
		if err != nil {
			return nil, err
		}
		o.upgrade.PauseObject = key
	}
	if certSecret != "" {
		secret, err := namespacedName("--webhook-cert-secret", certSecret)
		if err != nil {
			return nil, err
		}
		service, err := namespacedName("--webhook-service", webhookService)
		if err != nil {
			return nil, err
		}
		mutating, validating, ok := strings.Cut(webhookConfigs, ",")
		if !ok || mutating == "" || validating == "" || strings.Contains(validating, ",") {
			return nil, fmt.Errorf("--webhook-configurations %q: want <mutating>,<validating>", webhookConfigs)
		}
		o.selfManagedCerts = &webhookcert.Options{Secret: secret, Service: service, Mutating: mutating, Validating: validating,
			CertValidity: certValidity, CAValidity: caValidity}
		if err := o.selfManagedCerts.Validate(); err != nil {
			return nil, err
		}
	}
	if o.retryPeriod <= 0 || o.renewDeadline <= o.retryPeriod || o.leaseDuration <= o.renewDeadline {
		return nil, fmt.Errorf("leader election needs 0 < --leader-election-retry-period (%s) < --leader-election-renew-deadline (%s) < --leader-election-lease-duration (%s)",
			o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	if err := lease.ValidRelease(o.release); err != nil {
		return nil, fmt.Errorf("--release-identity: %w", err)
	}
	if o.returnGrace < 0 {
		return nil, fmt.Errorf("--returning-node-grace %s: must not be negative", o.returnGrace)
	}
	if o.removalHold < 0 {
		return nil, fmt.Errorf("--removal-hold %s: must not be negative (0: no bound)", o.removalHold)
	}
	if o.maxClockSkew < 0 {
		return nil, fmt.Errorf("--max-clock-skew %s: must not be negative (0 turns the bound off)", o.maxClockSkew)
	}
	if o.maxClockSkew > 0 && o.maxClockSkew < minClockSkew {
		return nil, fmt.Errorf("--max-clock-skew %s: must be 0 (no bound) or at least %s, the resolution of the API server's Date header", o.maxClockSkew, minClockSkew)
	}
	if o.upgrade.MaxPause < 0 {
		return nil, fmt.Errorf("--upgrade-max-pause %s: must not be negative", o.upgrade.MaxPause)
	}
	return o, nil
}

// namespacedName parses a flag's <namespace>/<name> value.
func namespacedName(flagName, value string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(value, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%s %q: want <namespace>/<name>", flagName, value)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == selfTestCommand {
		os.Exit(runSelfTest(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == cleanupCommand {
		os.Exit(runCleanup(os.Args[2:], os.Stdout))
	}
	// --kubeconfig is registered on flag.CommandLine by controller-runtime's config package.
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.printVersion {
		fmt.Println(version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "Manager exited with an error")
		os.Exit(1)
	}
}

func run(o *options) error {
	log := ctrl.Log.WithName("setup")
	log.Info("Garbage collection", "GOGC", applyGCDefault(os.LookupEnv), "memProfileRate", applyProfilingDefault(o.pprofAddr))

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(remediationv1alpha1.AddToScheme(scheme))

	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}

	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.metricsSecure,
		TLSOpts:       tlsOpts,
	}
	if o.metricsSecure {
		metricsOpts.FilterProvider = metricsauth.Filter
	}
	webhookCertDir := o.webhookCertDir
	if webhookCertDir == "" {
		webhookCertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs") // the webhook server's default
	}
	if o.metricsSecure && o.enableWebhooks {
		// The webhook's certificate, which the Helm chart's ServiceMonitor verifies against the
		// operator's (or cert-manager's) CA; without webhooks, controller-runtime's self-signed one.
		metricsOpts.TLSOpts = append(slices.Clone(tlsOpts), webhookcert.ServeMountedCertificate(webhookCertDir))
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgrOpts := ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		LeaderElectionNamespace:       o.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true, // the process exits right after, so handing over early is safe
		GracefulShutdownTimeout:       ptr.To(gracefulShutdownTimeout),
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:    o.webhookPort,
			CertDir: o.webhookCertDir,
			TLSOpts: tlsOpts,
		}),
	}
	certReady := make(chan struct{})
	certDir := webhookCertDir
	if o.enableWebhooks {
		if o.selfManagedCerts == nil {
			close(certReady) // cert-manager's certificate: the kubelet mounted it before the container started
		}
		mgrOpts.WebhookServer = webhookcert.Delayed(mgrOpts.WebhookServer, certReady, certDir)
	}
	controller.ConfigureManager(&mgrOpts)
	// Every API response of the manager (cache, leader election, writes) measures the clock skew:
	// the wrapper goes on the config before the manager copies it.
	clk := clock.RealClock{}
	skew := clockskew.New(clk, o.maxClockSkew)
	cfg.Wrap(skew.Wrap)
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	if o.selfManagedCerts != nil && o.enableWebhooks {
		certs := *o.selfManagedCerts
		certs.CertDir = certDir
		if err := webhookcert.AddRotator(mgr, certs, certReady); err != nil {
			return fmt.Errorf("setting up the webhook certificate rotator: %w", err)
		}
	}
	probe, err := clockskew.NewProbe(skew, mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := mgr.Add(probe); err != nil {
		return fmt.Errorf("adding the clock skew probe: %w", err)
	}
	if err := controller.SetupWithManager(mgr, controller.Options{Clock: clk, LeaseNamespace: o.leaseNamespace, Release: o.release, Upgrade: o.upgrade,
		ReturnGrace: o.returnGrace, RemovalHold: o.removalHold, ClockSkew: skew, ConditionTimeBound: o.conditionTimeBound}); err != nil {
		return err
	}

	if key := o.settingsConfigMap; key != nil {
		// The leader publishes (a runnable that needs leader election), again after an error.
		settings := opsettings.Settings{LeaseNamespace: o.leaseNamespace, ReturningNodeGrace: o.returnGrace, MaxClockSkew: o.maxClockSkew, RemovalHold: o.removalHold, Version: version}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Minute},
				func(ctx context.Context) (bool, error) {
					if err := opsettings.Publish(ctx, mgr.GetAPIReader(), mgr.GetClient(), *key, settings); err != nil {
						log.Error(err, "Publishing the settings; retrying")
						return false, nil
					}
					return true, nil
				})
		})); err != nil {
			return fmt.Errorf("adding the settings publisher: %w", err)
		}
	}

	if o.enableWebhooks {
		if err := webhookv1alpha1.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up webhooks: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	readyCheck := healthz.Ping
	if o.enableWebhooks {
		// Not ready until the webhook server serves, so the Service only routes admission to pods
		// that can answer it.
		readyCheck = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", readyCheck); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}

	log.Info("Starting manager", "version", version, "leaderElection", o.leaderElect, "webhooks", o.enableWebhooks, "metricsSecure", o.metricsSecure, "maxClockSkew", o.maxClockSkew)
	return mgr.Start(signalShutdownContext(o.shutdownDelay, log))
}
