// Pins the Prometheus Operator release whose CRDs (ServiceMonitor, PrometheusRule) the install
// tests apply; fetched as a module zip through the Go module proxy by fetch-crds.sh (nothing is built).
module pyctrl.dev/tools/prometheus-operator

go 1.26

require (
	github.com/prometheus-operator/prometheus-operator v0.85.0
)
