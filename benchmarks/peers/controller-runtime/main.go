// The controller-runtime peer of pyctrl's benchmarks (benchmarks/README.md).
//
// One controller for bench.pyctrl.dev/v1 Item in one namespace: reconcile reads the Item from the
// informer cache and, when status.observed differs from -mark followed by spec.value, merge-patches
// the status subresource. A tiny hand-written typed object (no code generation),
// MaxConcurrentReconciles = -concurrency, client-side rate limiting off (QPS < 0), metrics and
// probes off, no leader election.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var groupVersion = schema.GroupVersion{Group: "bench.pyctrl.dev", Version: "v1"}

// ItemSpec, ItemStatus, Item and ItemList mirror benchmarks/peers/crd.yaml.
type ItemSpec struct {
	Value string `json:"value"`
}

type ItemStatus struct {
	Observed string `json:"observed,omitempty"`
}

type Item struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ItemSpec    `json:"spec,omitempty"`
	Status            *ItemStatus `json:"status,omitempty"`
}

type ItemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Item `json:"items"`
}

func (in *Item) DeepCopyInto(out *Item) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Status != nil {
		status := *in.Status
		out.Status = &status
	}
}

func (in *Item) DeepCopy() *Item {
	out := new(Item)
	in.DeepCopyInto(out)
	return out
}

func (in *Item) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *ItemList) DeepCopyObject() runtime.Object {
	out := new(ItemList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Item, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

type reconciler struct {
	client client.Client
	mark   string
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var item Item
	if err := r.client.Get(ctx, req.NamespacedName, &item); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	observed := r.mark + item.Spec.Value
	if item.Status != nil && item.Status.Observed == observed {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(item.DeepCopy())
	item.Status = &ItemStatus{Observed: observed}
	return ctrl.Result{}, r.client.Status().Patch(ctx, &item, patch)
}

func main() {
	// a flag set of its own: controller-runtime registers a global -kubeconfig flag
	flags := flag.NewFlagSet("cr-bench", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the apiserver")
	namespace := flags.String("namespace", "", "the only namespace watched")
	concurrency := flags.Int("concurrency", 16, "MaxConcurrentReconciles")
	mark := flags.String("mark", "", "prefix of status.observed")
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" || *namespace == "" {
		fmt.Fprintln(os.Stderr, "usage: cr-bench -kubeconfig PATH -namespace NS [-concurrency N] [-mark M]")
		os.Exit(2)
	}

	ctrl.SetLogger(zap.New()) // info level, JSON: start-up lines and reconcile errors only

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS = -1 // no client-side rate limiter
	cfg.Burst = 1 << 20

	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(groupVersion, &Item{}, &ItemList{})
	metav1.AddToGroupVersion(scheme, groupVersion)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&Item{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *concurrency}).
		Complete(&reconciler{client: mgr.GetClient(), mark: *mark})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	fmt.Println("cr-bench: starting")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
		os.Exit(1)
	}
}
