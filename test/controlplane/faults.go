package controlplane

// Running reports whether component ("etcd", "kube-apiserver" or
// "kube-controller-manager") was started and has not exited since. Fault
// tests use it to tell a component that died on its own from one they
// stopped (StopAPIServer, StopEtcd clear it).
func (cp *ControlPlane) Running(component string) bool {
	for _, p := range []*process{cp.etcd, cp.apiserver, cp.kcm} {
		if p != nil && p.name == component {
			return p.pid() != 0 && !p.exited()
		}
	}
	return false
}
