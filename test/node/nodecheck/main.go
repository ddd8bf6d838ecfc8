// Command nodecheck runs inside the node test's pods (test/node), as a
// static binary in an image of its own:
//
//	nodecheck secret ENV_NAME FILE SHA256   the Secret's value, from the environment and from a
//	                                        file, matches SHA256; the root file system is read-only
//	nodecheck incluster NAMESPACE           in-cluster config (the kubernetes Service, the
//	                                        ServiceAccount token): GET /version, list Pods
//	nodecheck serve PORT                    answers "nodecheck" over HTTP until killed
//	nodecheck get URL                       GETs URL (retrying for a minute), wants "nodecheck"
//
// It prints what it found, never a Secret's value (SPEC X1), and exits
// non-zero when a check fails.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: nodecheck secret ENV FILE SHA256 | incluster NAMESPACE")
	}
	fmt.Printf("uid=%d gid=%d groups=%v\n", os.Getuid(), os.Getgid(), groups())
	switch os.Args[1] {
	case "secret":
		if len(os.Args) != 5 {
			fail("usage: nodecheck secret ENV FILE SHA256")
		}
		secret(os.Args[2], os.Args[3], os.Args[4])
	case "incluster":
		if len(os.Args) != 3 {
			fail("usage: nodecheck incluster NAMESPACE")
		}
		inCluster(os.Args[2])
	case "serve":
		serve(os.Args[2])
	case "get":
		get(os.Args[2])
	default:
		fail("unknown check " + os.Args[1])
	}
}

func secret(env, file, want string) {
	v, ok := os.LookupEnv(env)
	if !ok {
		fail("environment: " + env + " is not set")
	}
	if got := sum([]byte(v)); got != want {
		fail(fmt.Sprintf("environment: %s has sha256 %s, want %s", env, got, want))
	}
	fmt.Printf("environment: %s matches\n", env)
	st, err := os.Stat(file)
	if err != nil {
		fail("file: " + err.Error())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		fail("file: " + err.Error())
	}
	if got := sum(b); got != want {
		fail(fmt.Sprintf("file: %s has sha256 %s, want %s", file, got, want))
	}
	fmt.Printf("file: %s (mode %v) matches\n", file, st.Mode().Perm())
	if err := os.WriteFile("/nodecheck-write-test", []byte("x"), 0o600); err == nil {
		fail("root file system: writable, want read-only")
	}
	fmt.Println("root file system: read-only")
	fmt.Println("ok")
}

func inCluster(namespace string) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fail("in-cluster config: " + err.Error())
	}
	fmt.Printf("API server: %s\n", cfg.Host)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err.Error())
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		fail("GET /version: " + err.Error())
	}
	fmt.Printf("version: %s\n", v.GitVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fail("list pods: " + err.Error())
	}
	fmt.Printf("pods in %s: %d\n", namespace, len(pods.Items))
	fmt.Println("ok")
}

func serve(port string) {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("request from %s\n", r.RemoteAddr)
		fmt.Fprint(w, "nodecheck")
	})
	fail(http.ListenAndServe(":"+port, nil).Error())
}

func get(url string) {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) == "nodecheck" {
				fmt.Printf("GET %s: %q\nok\n", url, b)
				return
			}
			err = fmt.Errorf("%s: %q", resp.Status, b)
		}
		if time.Now().After(deadline) {
			fail("GET " + url + ": " + err.Error())
		}
		fmt.Printf("GET %s: %v (retrying)\n", url, err)
		time.Sleep(2 * time.Second)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func groups() []int {
	g, _ := os.Getgroups()
	return g
}

func fail(msg string) {
	fmt.Println("FAIL:", msg)
	os.Exit(1)
}
