// Command client-go-bench is the client-go side of two of kubewasm's benchmarks: a process the
// Rust benchmarks start and measure like their own variants.
//
//	client-go-bench sync KUBECONFIG         initial sync (informer/benches/initial_sync_real.rs)
//	client-go-bench sync-strip KUBECONFIG   the same, managedFields dropped by a transform
//	client-go-bench sync-list KUBECONFIG    the same as sync, WatchListClient off: paginated LISTs
//	client-go-bench controller KUBECONFIG   one density baseline controller (host/benches/density.rs)
//
// Both use client-go as controllers built on kube-controller-manager or controller-runtime
// do: a SharedInformerFactory with client-go's defaults (no resync, the WatchListClient
// feature's default) and the rest.Config's ContentType set to protobuf, which is what
// kube-controller-manager's --kube-api-content-type defaults to.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// protobuf is the content type client-go asks for when a rest.Config's ContentType is set to it.
const protobuf = "application/vnd.kubernetes.protobuf"

// probeObject is the ConfigMap the density benchmark patches (kubewasm_tests::density::PROBE_OBJECT).
const probeObject = "bench-000000"

// benchSelector selects the initial-sync benchmark's ConfigMaps, as its Rust variants do.
const benchSelector = "app.kubernetes.io/name=bench"

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: client-go-bench sync|sync-strip|sync-list|controller KUBECONFIG")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "sync":
		err = initialSync(os.Args[2], false)
	case "sync-strip":
		err = initialSync(os.Args[2], true)
	case "sync-list":
		// client-go reads its feature gates from KUBE_FEATURE_* when first asked: this turns
		// the streaming list off, the path of client-go before 1.35 (LIST, gzip when large).
		err = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
		if err == nil {
			err = initialSync(os.Args[2], false)
		}
	case "controller":
		err = controller(os.Args[2])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client-go-bench:", err)
		os.Exit(1)
	}
}

// config reads the kubeconfig and asks for protobuf, falling back to JSON for what the server
// does not serve in protobuf, as kube-controller-manager does.
func config(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	return cfg, nil
}

// sample is what the initial-sync benchmark's children print, one JSON object on stdout.
type sample struct {
	Objects    int     `json:"objects"`
	SyncMs     float64 `json:"sync_ms"`
	CPUMs      float64 `json:"cpu_ms"`
	IdleRSS    uint64  `json:"idle_rss"`
	SyncedRSS  uint64  `json:"synced_rss"`
	Protobuf   uint64  `json:"protobuf_lists"`
	JSONAnswer uint64  `json:"json_lists"`
	// Of those, the WATCHes with sendInitialEvents=true (a streaming list).
	Streaming uint64 `json:"streaming_lists"`
}

// listCounter counts the answers to the requests that bring an informer its initial list (a
// LIST, or a WATCH with sendInitialEvents=true under the WatchListClient feature), by the
// content type the server answered with.
type listCounter struct {
	protobuf, others, streaming atomic.Uint64
}

// countingTransport counts into its listCounter the answers that pass through it.
type countingTransport struct {
	next    http.RoundTripper
	counter *listCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.counter
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	query := req.URL.Query()
	streaming := query.Get("watch") == "true" && query.Get("sendInitialEvents") == "true"
	initial := query.Get("watch") != "true" || streaming
	if initial && strings.HasSuffix(req.URL.Path, "/configmaps") {
		if streaming {
			c.streaming.Add(1)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), protobuf) {
			c.protobuf.Add(1)
		} else {
			c.others.Add(1)
		}
	}
	return resp, nil
}

func initialSync(kubeconfig string, strip bool) error {
	cfg, err := config(kubeconfig)
	if err != nil {
		return err
	}
	counter := &listCounter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, counter: counter}
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	// As the Rust children do: the connection is up, then a moment before the idle figures.
	time.Sleep(100 * time.Millisecond)
	idleRSS, err := rss()
	if err != nil {
		return err
	}
	cpu0, err := cpuMs()
	if err != nil {
		return err
	}
	started := time.Now()
	options := []informers.SharedInformerOption{
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchSelector }),
	}
	if strip {
		options = append(options, informers.WithTransform(stripManagedFields))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, options...)
	informer := factory.Core().V1().ConfigMaps().Informer()
	ctx := context.Background()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("%v did not sync", typ)
		}
	}
	syncMs := float64(time.Since(started).Microseconds()) / 1000
	cpu1, err := cpuMs()
	if err != nil {
		return err
	}
	syncedRSS, err := rss()
	if err != nil {
		return err
	}
	out := sample{
		Objects:    len(informer.GetStore().ListKeys()),
		SyncMs:     syncMs,
		CPUMs:      cpu1 - cpu0,
		IdleRSS:    idleRSS,
		SyncedRSS:  syncedRSS,
		Protobuf:   counter.protobuf.Load(),
		JSONAnswer: counter.others.Load(),
		Streaming:  counter.streaming.Load(),
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return err
	}
	// The informers are still running: leave without tearing them down, as the Rust children do.
	os.Exit(0)
	return nil
}

// stripManagedFields drops managedFields before an object enters the cache, as kubewasm's
// informer does; client-go keeps them unless a controller installs a transform like this one.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// controller is one density baseline controller with its own cache: informers on Pods and
// ConfigMaps in every namespace (what the pod-diff plugin watches), printing `density-synced`
// once both caches are synced and `density-update NS/NAME` for each later change of the probe
// ConfigMap, one write per line.
func controller(kubeconfig string) error {
	cfg, err := config(kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	factory.Core().V1().Pods().Informer()
	configMaps := factory.Core().V1().ConfigMaps().Informer()
	_, err = configMaps.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			cm, ok := obj.(*corev1.ConfigMap)
			if ok && cm.Name == probeObject {
				fmt.Fprintf(os.Stdout, "density-update %s/%s\n", cm.Namespace, cm.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("adding the handler: %w", err)
	}
	ctx := context.Background()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("%v did not sync", typ)
		}
	}
	fmt.Fprintln(os.Stdout, "density-synced")
	<-ctx.Done()
	return nil
}

// cpuMs is this process's user + system CPU time in ms, from /proc/self/stat (10 ms ticks).
func cpuMs() (float64, error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	text := string(stat)
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/self/stat: no command name")
	}
	fields := strings.Fields(text[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/self/stat: %d fields", len(fields))
	}
	utime, err := strconv.ParseFloat(fields[11], 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/stat utime: %w", err)
	}
	stime, err := strconv.ParseFloat(fields[12], 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/stat stime: %w", err)
	}
	return (utime + stime) * 10, nil
}

// rss is this process's resident set size in bytes, from VmRSS in /proc/self/status.
func rss() (uint64, error) {
	file, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer file.Close()
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			kib, err := strconv.ParseUint(fields[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS: %w", err)
			}
			return kib * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}
