// CoreDNS with the plugins a cluster DNS needs: the set kubeadm's Corefile uses (errors, health,
// ready, kubernetes, prometheus, forward, cache, loop, reload, loadbalance) plus log and hosts.
// CoreDNS's documented way to choose plugins at compile time: its own coremain, the plugins imported
// and dnsserver.Directives set in CoreDNS's order (core/dnsserver/zdirectives.go). The cloud
// plugins (route53, azure, clouddns) and their SDKs are left out: they make most of a full build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order matters (a plugin sees the effects of those after it); it is CoreDNS's own.
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache",
	"hosts", "kubernetes", "loop", "forward",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
