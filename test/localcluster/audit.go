package localcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// UserAuditPolicy returns an audit policy that records, at level Metadata, every request of the user
// (for example "system:serviceaccount:node-healthcheck:nhc-node-healthcheck") when its response is
// complete, and a watch also when it starts (it completes only when it ends); nothing else, so that
// the requests of other clients (heartbeats of thousands of nodes) cost the log nothing.
func UserAuditPolicy(user string) string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "Panic"]
rules:
- level: Metadata
  users: [%q]
- level: None
`, user)
}

// configureAudit writes the policy into dir and points the API server at it and at an audit log in
// dir, which it returns; without a policy it does nothing.
func configureAudit(api *envtest.APIServer, dir, policy string) (string, error) {
	if policy == "" {
		return "", nil
	}
	policyFile := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		return "", err
	}
	log := filepath.Join(dir, "audit.log")
	api.Configure().Set("audit-policy-file", policyFile).
		Set("audit-log-path", log).
		Set("audit-log-format", "json").
		// Blocking: each event is written before the response, so a request is in the log once
		// its client has the answer, and none is dropped under load.
		Set("audit-log-mode", "blocking").
		// The log grows without rotation for the cluster's life (it lives in the scratch folder).
		Set("audit-log-maxsize", "0")
	return log, nil
}

// AuditEvent is the part of an audit.k8s.io/v1 Event (level Metadata) that request counts need.
type AuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestReceivedTimestamp is when the API server received the request, StageTimestamp when
	// the stage (for ResponseComplete: the response) was reached.
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// ReadAuditLog parses an audit log of JSON lines.
func ReadAuditLog(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
