package webhookcert

import (
	"net/http"
	"net/url"
	"testing"

	"k8s.io/client-go/rest"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNameScopedTransport(t *testing.T) {
	names := map[string]string{
		"/api/v1/namespaces/nhc/secrets":                                      "webhook-cert",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": "nhc-mutating",
	}
	tests := []struct {
		name, method, url string
		wantSelector      string // "" : the request goes out unchanged
	}{
		{"list of the Secret's collection", http.MethodGet, "https://api:6443/api/v1/namespaces/nhc/secrets?limit=500", "metadata.name=webhook-cert"},
		{"watch of the Secret's collection", http.MethodGet, "https://api:6443/api/v1/namespaces/nhc/secrets?watch=true&resourceVersion=7", "metadata.name=webhook-cert"},
		{"behind a path prefix", http.MethodGet, "https://proxy/k8s/clusters/c-1/api/v1/namespaces/nhc/secrets?watch=true", "metadata.name=webhook-cert"},
		{"a cluster-scoped collection", http.MethodGet, "https://api:6443/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "metadata.name=nhc-mutating"},
		{"a selector already set", http.MethodGet, "https://api:6443/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?fieldSelector=a%3Db", "a=b,metadata.name=nhc-mutating"},
		{"a get by name", http.MethodGet, "https://api:6443/api/v1/namespaces/nhc/secrets/webhook-cert", ""},
		{"an update", http.MethodPut, "https://api:6443/api/v1/namespaces/nhc/secrets/webhook-cert", ""},
		{"Secrets of another namespace", http.MethodGet, "https://api:6443/api/v1/namespaces/other-nhc/secrets", ""},
		{"another collection", http.MethodGet, "https://api:6443/api/v1/namespaces/nhc/configmaps", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent *http.Request
			rt := &nameScopedTransport{names: names, next: roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				sent = r
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
			})}
			req, err := http.NewRequest(tt.method, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			original := req.URL.String()
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if req.URL.String() != original {
				t.Errorf("the caller's request was changed: %s", req.URL)
			}
			want, _ := url.Parse(tt.url)
			query := want.Query()
			if tt.wantSelector != "" {
				query.Set("fieldSelector", tt.wantSelector)
			}
			if sent.URL.Path != want.Path || sent.URL.Query().Encode() != query.Encode() {
				t.Errorf("sent %s, want %s?%s", sent.URL, want.Path, query.Encode())
			}
		})
	}
}

// The configuration the rotator gets scopes its requests; the manager's own is left alone.
func TestNameScopedConfig(t *testing.T) {
	base := &rest.Config{Host: "https://api:6443"}
	scoped := nameScoped(base, map[string]string{"/api/v1/namespaces/nhc/secrets": "webhook-cert"})
	if base.WrapTransport != nil {
		t.Error("nameScoped changed the manager's configuration")
	}
	var sent *http.Request
	rt := scoped.WrapTransport(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "https://api:6443/api/v1/namespaces/nhc/secrets?watch=true", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got := sent.URL.Query().Get("fieldSelector"); got != "metadata.name=webhook-cert" {
		t.Errorf("fieldSelector %q", got)
	}
}
