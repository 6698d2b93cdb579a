// The client-go peer of benchmarks/watch_stall_bench.py: one shared informer on ConfigMaps in one
// namespace, through the server given by -server (the benchmark's fault proxy), reporting every
// event it delivers as one JSON line on stdout: {"event":"add|update|delete","name":...,"v":...}
// where v is data["v"]; {"event":"synced"} once the informer has synced.
//
// Everything else is client-go's defaults, as an operator gets them: the HTTP/2 transport with
// its connection health check (apimachinery SetTransportDefaults: a ping after 30 s without a
// frame, the connection dropped 15 s later without an answer), the reflector's 5-10 minute watch
// timeouts, bookmarks, and its backoff. Client-side rate limiting is off (QPS < 0).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func report(event string, obj interface{}) {
	line := map[string]string{"event": event}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		line["name"] = cm.Name
		line["v"] = cm.Data["v"]
	}
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(line)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the control plane")
	server := flag.String("server", "", "the apiserver URL to use instead of the kubeconfig's (the proxy)")
	namespace := flag.String("namespace", "", "the namespace whose ConfigMaps are watched")
	flag.Parse()
	if *kubeconfig == "" || *namespace == "" {
		fmt.Fprintln(os.Stderr, "usage: cg-watch -kubeconfig FILE -namespace NS [-server URL]")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags(*server, *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cg-watch: kubeconfig %s: %v\n", *kubeconfig, err)
		os.Exit(1)
	}
	cfg.QPS = -1
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cg-watch: client: %v\n", err)
		os.Exit(1)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(*namespace))
	informer := factory.Core().V1().ConfigMaps().Informer()
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { report("add", obj) },
		UpdateFunc: func(_, obj interface{}) { report("update", obj) },
		DeleteFunc: func(obj interface{}) { report("delete", obj) },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cg-watch: handler: %v\n", err)
		os.Exit(1)
	}
	ctx := context.Background()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		fmt.Fprintln(os.Stderr, "cg-watch: cache did not sync")
		os.Exit(1)
	}
	report("synced", nil)
	select {}
}
