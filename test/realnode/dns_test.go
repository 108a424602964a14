package realnode

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestClusterDNS asks the cluster's DNS with Go's own resolver, as the operator's self-test pod does:
// a Service's name resolves to its cluster IP, a headless or missing Service and any other name are
// not found. It needs no cluster: the server listens on the loopback.
func TestClusterDNS(t *testing.T) {
	// The Services' cluster IPs by namespace/name, as apiServiceGetter returns them from the API
	// (which the real-node suite's helm test uses): a headless Service has none.
	services := map[string]string{"node-healthcheck/nhc-node-healthcheck-metrics": "10.96.12.34", "default/headless": ""}
	get := func(_ context.Context, namespace, name string) (string, error) {
		return services[namespace+"/"+name], nil
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go serveDNS(conn, get, t.Logf)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp4", conn.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for name, want := range map[string]string{
		"nhc-node-healthcheck-metrics.node-healthcheck.svc.cluster.local":     "10.96.12.34",
		"nhc-node-healthcheck-metrics.node-healthcheck.svc.cluster.local.":    "10.96.12.34",
		"NHC-Node-Healthcheck-Metrics.Node-Healthcheck.svc.Cluster.Local":     "10.96.12.34",
		"missing.node-healthcheck.svc.cluster.local":                          "",
		"headless.default.svc.cluster.local":                                  "",
		"nhc-node-healthcheck-metrics.node-healthcheck.svc.svc.cluster.local": "",
		"node-healthcheck.svc.cluster.local":                                  "",
		"example.com":                                                         "",
	} {
		addrs, err := r.LookupHost(ctx, name)
		if want == "" {
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
				t.Errorf("%s: got %v, %v; want not found", name, addrs, err)
			}
			continue
		}
		if err != nil || len(addrs) != 1 || addrs[0] != want {
			t.Errorf("%s: got %v, %v; want [%s]", name, addrs, err, want)
		}
	}
	// A Service's name has no AAAA record: an empty answer, not an error.
	ips, err := r.LookupIP(ctx, "ip6", "nhc-node-healthcheck-metrics.node-healthcheck.svc.cluster.local")
	var dnsErr *net.DNSError
	if len(ips) != 0 || !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("AAAA: got %v, %v; want no records", ips, err)
	}
}
