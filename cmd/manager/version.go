package main

// version is the operator's version: `make image` and `make build` stamp the chart's appVersion into
// it with -ldflags "-X main.version=..."; a plain `go build` leaves "dev".
var version = "dev"
