package main

import "runtime/debug"

// version is the plugin's version, stamped as the manager's is (cmd/manager/version.go): `make
// build` sets the chart's appVersion with -ldflags "-X main.version=..."; a plain `go build` leaves
// "dev".
var version = "dev"

// pluginVersion is version, or, for an unstamped binary that `go install ...@<version>` built, the
// module version the go command recorded in it.
func pluginVersion() string {
	if version != "dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}
