// Package argocd runs the chart's Argo CD health check of NodeHealthCheck
// (charts/node-healthcheck/files/argocd/health.lua) as Argo CD does (util/lua in argoproj/argo-cd):
// in github.com/yuin/gopher-lua, the interpreter Argo CD embeds, with only the package, base and
// table libraries open (as for a health check from argocd-cm), within a second, the live object in
// the global obj, and the returned table read as the health status. The e2e suite runs it against
// statuses the operator wrote.
package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// Argo CD's health statuses (gitops-engine pkg/health).
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Health is what the script returned.
type Health struct {
	Status  string
	Message string
}

// ScriptPath is where the chart ships the health check.
func ScriptPath() string {
	return testutil.Path("charts", "node-healthcheck", "files", "argocd", "health.lua")
}

// Evaluate runs the chart's health check on the object (as an unstructured object's content).
func Evaluate(obj map[string]any) (Health, error) {
	script, err := os.ReadFile(ScriptPath())
	if err != nil {
		return Health{}, err
	}
	return Run(string(script), obj)
}

// Run runs a health check script on the object as Argo CD runs one from argocd-cm.
func Run(script string, obj map[string]any) (Health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), NRet: 0, Protect: true}, lua.LString(name)); err != nil {
			return Health{}, fmt.Errorf("opening the Lua library %q: %w", name, err)
		}
	}
	// Argo CD's bound on a script's run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decode(l, obj))
	if err := l.DoString(script); err != nil {
		return Health{}, fmt.Errorf("running the health check: %w", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the health check returned %s, not a table", l.Get(-1).Type())
	}
	var h Health
	for key, to := range map[string]*string{"status": &h.Status, "message": &h.Message} {
		switch v := ret.RawGetString(key).(type) {
		case lua.LString:
			*to = string(v)
		case *lua.LNilType:
		default:
			return Health{}, fmt.Errorf("the health check returned a %s %s, not a string", key, v.Type())
		}
	}
	switch h.Status {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
		return h, nil
	}
	// Argo CD shows Unknown, "Lua returned an invalid health status".
	return Health{}, fmt.Errorf("the health check returned status %q, which Argo CD does not know", h.Status)
}

// decode converts an unstructured object's value into Lua as Argo CD does (util/lua decodeValue):
// numbers (float64, int64 as the API server's JSON decodes to, int, int32) to Lua numbers,
// json.Number to strings, lists to sequences, maps to tables, anything else to nil.
func decode(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int, int32, int64:
		return lua.LNumber(reflect.ValueOf(v).Int())
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(decode(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetH(lua.LString(k), decode(l, item))
		}
		return t
	}
	return lua.LNil
}
