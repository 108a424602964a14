package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The cluster's DNS: pods resolve Services by name, as on every cluster kubeadm or kind sets up,
// where CoreDNS answers them. There is no registry to pull CoreDNS's image from, so the starter
// answers the part of the Kubernetes DNS specification that clients of a Service use: an A record
// <service>.<namespace>.svc.<ClusterDomain> for each Service with a cluster IP. Everything else is
// NXDOMAIN (nothing here reaches beyond the host, so there is nothing to forward to): AAAA and other
// types of a Service's name are answered with no records. It listens on HostIP, port 53 (UDP, the
// transport resolvers use for answers this small), which the kubelet gives the pods as their
// nameserver (clusterDNS); it lives in the starter's process and ends with it.
const (
	// ClusterDomain is the cluster's DNS domain (the kubelet's clusterDomain).
	ClusterDomain = "cluster.local"
	// dnsTTL is the records' time to live: as CoreDNS's kubernetes plugin's default.
	dnsTTL = 5
	// dnsLookupTimeout bounds the API call behind one answer; resolvers retry after about 5s.
	dnsLookupTimeout = 2 * time.Second
)

// serviceGetter returns a Service's cluster IP: "" with a nil error when there is no such Service
// or it has none.
type serviceGetter func(ctx context.Context, namespace, name string) (string, error)

// apiServiceGetter looks Services up in the API.
func apiServiceGetter(cs kubernetes.Interface) serviceGetter {
	return func(ctx context.Context, namespace, name string) (string, error) {
		svc, err := cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return "", nil
		}
		return svc.Spec.ClusterIP, nil
	}
}

// startDNS serves the cluster's DNS on HostIP:53 until Stop.
func (c *Cluster) startDNS(cs kubernetes.Interface) error {
	conn, err := net.ListenPacket("udp4", net.JoinHostPort(HostIP, "53"))
	if err != nil {
		return fmt.Errorf("the cluster's DNS: %w", err)
	}
	c.dns = conn
	go serveDNS(conn, apiServiceGetter(cs), c.logf)
	return nil
}

// serveDNS answers queries on conn until it is closed.
func serveDNS(conn net.PacketConn, get serviceGetter, logf func(string, ...any)) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			logf("DNS: %v", err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), dnsLookupTimeout)
		answer, err := dnsAnswer(ctx, buf[:n], get)
		cancel()
		if err != nil {
			logf("DNS: query from %s: %v", from, err)
		}
		if answer != nil {
			_, _ = conn.WriteTo(answer, from)
		}
	}
}

// dnsAnswer returns the response to one query (nil for a message that is no query to answer), and
// an error to log.
func dnsAnswer(ctx context.Context, query []byte, get serviceGetter) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	// Authoritative, with recursion available: resolvers take an empty answer of an authoritative
	// server as "no records" (Go's as a lame referral otherwise).
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	ip, lookupErr := serviceIP(ctx, q.Name.String(), get)
	var a [4]byte
	switch {
	case lookupErr != nil:
		rh.RCode = dnsmessage.RCodeServerFailure
	case ip == nil:
		rh.RCode = dnsmessage.RCodeNameError
	default:
		copy(a[:], ip.To4())
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if ip != nil && q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		if err := b.StartAnswers(); err != nil {
			return nil, err
		}
		if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}, dnsmessage.AResource{A: a}); err != nil {
			return nil, err
		}
	}
	msg, err := b.Finish()
	return msg, errors.Join(lookupErr, err)
}

// serviceIP returns the cluster IP that name (<service>.<namespace>.svc.<ClusterDomain>.) stands
// for: nil for any other name, and for a Service that does not exist or has no cluster IP.
func serviceIP(ctx context.Context, name string, get serviceGetter) (net.IP, error) {
	rest, ok := strings.CutSuffix(strings.ToLower(name), ".svc."+ClusterDomain+".")
	if !ok {
		return nil, nil
	}
	svc, ns, ok := strings.Cut(rest, ".")
	if !ok || svc == "" || ns == "" || strings.Contains(ns, ".") {
		return nil, nil
	}
	ip, err := get(ctx, ns, svc)
	if err != nil || ip == "" {
		return nil, err
	}
	parsed := net.ParseIP(ip).To4()
	if parsed == nil {
		return nil, nil
	}
	return parsed, nil
}
