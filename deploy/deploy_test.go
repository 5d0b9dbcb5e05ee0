// Package deploy holds no code: its test checks that the deployment files
// (deploy/kubernetes, docker-compose.yml, Dockerfile) parse and agree with the
// Breakwater config they embed.
//
// The config is read into a small local struct with go-toml rather than
// through the config package, so this test checks the files' consistency,
// not the config's validity (config has its own tests).
package deploy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"
)

// bwConfig is the part of config.toml these files depend on.
type bwConfig struct {
	Server struct {
		Listen        string `toml:"listen"`
		AdminTokenEnv string `toml:"admin_token_env"`
	} `toml:"server"`
	Cache struct {
		PartitionSecretEnv string `toml:"partition_secret_env"`
		DataDir            string `toml:"data_dir"`
	} `toml:"cache"`
	Vector struct {
		Backend string `toml:"backend"`
		Qdrant  struct {
			URL       string `toml:"url"`
			APIKeyEnv string `toml:"api_key_env"`
		} `toml:"qdrant"`
	} `toml:"vector"`
	Upstreams []struct {
		Name      string `toml:"name"`
		APIKeyEnv string `toml:"api_key_env"`
	} `toml:"upstreams"`
}

// secretEnvs are the variables the config expects the environment to hold.
func (c *bwConfig) secretEnvs() []string {
	envs := []string{c.Vector.Qdrant.APIKeyEnv, c.Cache.PartitionSecretEnv, c.Server.AdminTokenEnv}
	for _, u := range c.Upstreams {
		envs = append(envs, u.APIKeyEnv)
	}
	return slices.DeleteFunc(envs, func(s string) bool { return s == "" })
}

func parseConfig(t *testing.T, text string) *bwConfig {
	t.Helper()
	var c bwConfig
	if err := toml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("parse config.toml: %v", err)
	}
	return &c
}

func hostPort(t *testing.T, what, addr string) (string, int) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err = errors.Join(err, perr); err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	return host, port
}

// Kubernetes objects, only the fields the checks read.
type object struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   meta              `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	Spec       struct {
		// Service
		ClusterIP string        `yaml:"clusterIP"`
		Ports     []servicePort `yaml:"ports"`
		// Deployment, StatefulSet (and Service, as a plain map)
		Selector    yaml.Node `yaml:"selector"`
		ServiceName string    `yaml:"serviceName"`
		Template    struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type servicePort struct {
	Name       string    `yaml:"name"`
	Port       int       `yaml:"port"`
	TargetPort yaml.Node `yaml:"targetPort"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name      string    `yaml:"name"`
		EmptyDir  yaml.Node `yaml:"emptyDir"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name  string   `yaml:"name"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	SecurityContext *struct {
		RunAsNonRoot           *bool `yaml:"runAsNonRoot"`
		RunAsUser              *int  `yaml:"runAsUser"`
		ReadOnlyRootFilesystem *bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

// port resolves a port that is a number or the name of one of c's ports.
func (c *container) port(n yaml.Node) int {
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	return 0
}

func (c *container) secretEnv(name string) (secret, key string, ok bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key, true
		}
	}
	return "", "", false
}

func (c *container) mountPath(volume string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

// readDocs decodes every YAML document of path. Fields that object does
// not model are ignored.
func readDocs(t *testing.T, path string) []object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("parse %s document %d: %v", path, len(docs)+1, err)
		}
		docs = append(docs, o)
	}
}

// manifests reads every document of deploy/kubernetes/*.yaml, by kind.
func manifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob kubernetes/*.yaml: %v (%d files)", err, len(files))
	}
	byKind := map[string][]object{}
	for _, f := range files {
		for _, o := range readDocs(t, f) {
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
	}
	return byKind
}

func one(t *testing.T, byKind map[string][]object, kind string) object {
	t.Helper()
	if got := len(byKind[kind]); got != 1 {
		t.Fatalf("%d objects of kind %s, want 1", got, kind)
	}
	return byKind[kind][0]
}

// sidecar returns the Deployment's breakwater container, native sidecar or
// plain container.
func sidecar(t *testing.T, d object) container {
	t.Helper()
	spec := d.Spec.Template.Spec
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if c.Name == "breakwater" {
			return c
		}
	}
	t.Fatalf("deployment %s has no container named breakwater", d.Metadata.Name)
	return container{}
}

func configMapConfig(t *testing.T, byKind map[string][]object) *bwConfig {
	t.Helper()
	cm := one(t, byKind, "ConfigMap")
	text, ok := cm.Data["config.toml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no config.toml", cm.Metadata.Name)
	}
	return parseConfig(t, text)
}

func TestManifestKinds(t *testing.T) {
	byKind := manifests(t)
	wantAPI := map[string]string{
		"ConfigMap":     "v1",
		"Service":       "v1",
		"Deployment":    "apps/v1",
		"StatefulSet":   "apps/v1",
		"NetworkPolicy": "networking.k8s.io/v1",
	}
	for kind, objs := range byKind {
		want, known := wantAPI[kind]
		if !known {
			t.Errorf("unexpected kind %q", kind)
			continue
		}
		for _, o := range objs {
			if o.APIVersion != want {
				t.Errorf("%s %s: apiVersion %q, want %q", kind, o.Metadata.Name, o.APIVersion, want)
			}
			if o.Metadata.Name == "" {
				t.Errorf("%s without metadata.name", kind)
			}
		}
	}
	for _, kind := range []string{"ConfigMap", "Service", "Deployment", "StatefulSet"} {
		if len(byKind[kind]) == 0 {
			t.Errorf("no %s in kubernetes/", kind)
		}
	}
}

func TestSidecarMatchesConfig(t *testing.T) {
	byKind := manifests(t)
	cfg := configMapConfig(t, byKind)
	d := one(t, byKind, "Deployment")
	bw := sidecar(t, d)
	host, port := hostPort(t, "[server] listen", cfg.Server.Listen)

	// Kubelet httpGet probes and Prometheus connect to the pod IP.
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("[server] listen host %q: httpGet probes and scrapes need 0.0.0.0", host)
	}
	if got := len(bw.Ports); got != 1 || bw.Ports[0].ContainerPort != port {
		t.Errorf("breakwater containerPort = %+v, want exactly %d (from listen %q)", bw.Ports, port, cfg.Server.Listen)
	}
	probes := []struct {
		name string
		p    *probe
		path string
	}{
		{"readiness", bw.ReadinessProbe, "/readyz"},
		{"liveness", bw.LivenessProbe, "/healthz"},
	}
	for _, tc := range probes {
		if tc.p == nil || tc.p.HTTPGet == nil {
			t.Errorf("%s probe: missing or not httpGet", tc.name)
			continue
		}
		if got, want := tc.p.HTTPGet.Path, tc.path; got != want {
			t.Errorf("%s probe path = %q, want %q", tc.name, got, want)
		}
		if got, want := bw.port(tc.p.HTTPGet.Port), port; got != want {
			t.Errorf("%s probe port = %d (%q), want %d", tc.name, got, tc.p.HTTPGet.Port.Value, want)
		}
	}

	ann := d.Spec.Template.Metadata.Annotations
	if got, want := ann["prometheus.io/scrape"], "true"; got != want {
		t.Errorf("prometheus.io/scrape = %q, want %q", got, want)
	}
	if got, want := ann["prometheus.io/port"], strconv.Itoa(port); got != want {
		t.Errorf("prometheus.io/port = %q, want %q", got, want)
	}
	if got, want := ann["prometheus.io/path"], "/metrics"; got != want {
		t.Errorf("prometheus.io/path = %q, want %q", got, want)
	}
}

func TestSidecarHardening(t *testing.T) {
	byKind := manifests(t)
	cfg := configMapConfig(t, byKind)
	cm := one(t, byKind, "ConfigMap")
	d := one(t, byKind, "Deployment")
	bw := sidecar(t, d)
	spec := d.Spec.Template.Spec

	sc := bw.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("breakwater: readOnlyRootFilesystem not true")
	}
	nonRoot := spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot || sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("breakwater: want runAsNonRoot and a non-zero runAsUser")
	}
	if bw.Resources.Requests["cpu"] == "" || bw.Resources.Requests["memory"] == "" || bw.Resources.Limits["memory"] == "" {
		t.Errorf("breakwater resources = %+v, want cpu/memory requests and a memory limit", bw.Resources)
	}

	// Volumes: the config from the ConfigMap at the path given by -config,
	// the data directory on an emptyDir (the root filesystem is read-only).
	configPath := ""
	for i, a := range bw.Args {
		if a == "-config" && i+1 < len(bw.Args) {
			configPath = bw.Args[i+1]
		}
	}
	var sawConfig, sawData bool
	for _, v := range spec.Volumes {
		mp := bw.mountPath(v.Name)
		switch {
		case v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name:
			sawConfig = true
			if got, want := mp+"/config.toml", configPath; got != want {
				t.Errorf("ConfigMap mounted so that config.toml is at %q, -config says %q", got, want)
			}
		case v.EmptyDir.Kind != 0 && mp == cfg.Cache.DataDir:
			sawData = true
		}
	}
	if !sawConfig {
		t.Errorf("breakwater does not mount ConfigMap %s", cm.Metadata.Name)
	}
	if !sawData {
		t.Errorf("no emptyDir mounted at cache.data_dir %q", cfg.Cache.DataDir)
	}

	// Every *_env key of the config is filled from a Secret.
	for _, env := range cfg.secretEnvs() {
		if _, _, ok := bw.secretEnv(env); !ok {
			t.Errorf("config reads $%s, but the breakwater container does not set it from a Secret", env)
		}
	}
}

func TestQdrantAddress(t *testing.T) {
	byKind := manifests(t)
	cfg := configMapConfig(t, byKind)
	if got, want := cfg.Vector.Backend, "qdrant"; got != want {
		t.Fatalf("vector.backend = %q, want %q", got, want)
	}
	ss := one(t, byKind, "StatefulSet")
	var svc object
	for _, s := range byKind["Service"] {
		if s.Metadata.Name == ss.Spec.ServiceName {
			svc = s
		}
	}
	if svc.Metadata.Name == "" {
		t.Fatalf("no Service named %q (the StatefulSet's serviceName)", ss.Spec.ServiceName)
	}
	if got, want := svc.Spec.ClusterIP, "None"; got != want {
		t.Errorf("Service %s clusterIP = %q, want %q (headless)", svc.Metadata.Name, got, want)
	}
	var selector map[string]string
	if err := svc.Spec.Selector.Decode(&selector); err != nil || len(selector) == 0 {
		t.Fatalf("Service %s selector: %v", svc.Metadata.Name, err)
	}
	for k, v := range selector {
		if got := ss.Spec.Template.Metadata.Labels[k]; got != v {
			t.Errorf("Service selects %s=%s, StatefulSet pods have %q", k, v, got)
		}
	}

	host, port := hostPort(t, "vector.qdrant.url", cfg.Vector.Qdrant.URL)
	if host != svc.Metadata.Name && !strings.HasPrefix(host, svc.Metadata.Name+".") {
		t.Errorf("vector.qdrant.url host %q does not name Service %q", host, svc.Metadata.Name)
	}
	if got, want := port, 6334; got != want {
		t.Errorf("vector.qdrant.url port = %d, want %d (gRPC)", got, want)
	}
	qd := ss.Spec.Template.Spec.Containers
	if len(qd) != 1 {
		t.Fatalf("StatefulSet has %d containers, want 1", len(qd))
	}
	var grpcOK bool
	for _, p := range svc.Spec.Ports {
		if p.Port == port && qd[0].port(p.TargetPort) == 6334 {
			grpcOK = true
		}
	}
	if !grpcOK {
		t.Errorf("Service %s has no port %d reaching Qdrant's gRPC container port 6334", svc.Metadata.Name, port)
	}

	if len(ss.Spec.VolumeClaimTemplates) == 0 {
		t.Fatalf("StatefulSet has no volumeClaimTemplates")
	}
	if got, want := qd[0].mountPath(ss.Spec.VolumeClaimTemplates[0].Metadata.Name), "/qdrant/storage"; got != want {
		t.Errorf("claim %s mounted at %q, want %q", ss.Spec.VolumeClaimTemplates[0].Metadata.Name, got, want)
	}

	// Both sides read the API key from the same Secret entry.
	bw := sidecar(t, one(t, byKind, "Deployment"))
	s1, k1, ok1 := bw.secretEnv(cfg.Vector.Qdrant.APIKeyEnv)
	s2, k2, ok2 := qd[0].secretEnv("QDRANT__SERVICE__API_KEY")
	if !ok1 || !ok2 || s1 != s2 || k1 != k2 {
		t.Errorf("Qdrant API key: sidecar %s/%s (%v), Qdrant %s/%s (%v), want the same Secret key", s1, k1, ok1, s2, k2, ok2)
	}
}

// compose models the parts of docker-compose.yml the checks read.
type compose struct {
	Services map[string]struct {
		Profiles    []string          `yaml:"profiles"`
		Image       string            `yaml:"image"`
		DependsOn   map[string]any    `yaml:"depends_on"`
		Command     []string          `yaml:"command"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Configs []struct {
			Source string `yaml:"source"`
			Target string `yaml:"target"`
		} `yaml:"configs"`
	} `yaml:"services"`
	Configs map[string]struct {
		Content string `yaml:"content"`
	} `yaml:"configs"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestCompose(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatalf("read docker-compose.yml: %v", err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	bw, ok := c.Services["breakwater"]
	if !ok {
		t.Fatalf("no breakwater service")
	}
	if _, ok := c.Services["qdrant"]; !ok {
		t.Fatalf("no qdrant service")
	}
	if len(bw.Configs) != 1 {
		t.Fatalf("breakwater service has %d configs, want 1", len(bw.Configs))
	}
	if got, want := bw.Configs[0].Target, bw.Command[len(bw.Command)-1]; got != want {
		t.Errorf("config mounted at %q, command reads %q", got, want)
	}
	cfg := parseConfig(t, c.Configs[bw.Configs[0].Source].Content)

	_, port := hostPort(t, "[server] listen", cfg.Server.Listen)
	if len(bw.Ports) != 1 {
		t.Fatalf("breakwater ports = %v, want one mapping", bw.Ports)
	}
	// "127.0.0.1:8080:8080" -> host ip, host port, container port.
	parts := strings.Split(bw.Ports[0], ":")
	if got, want := parts[len(parts)-1], strconv.Itoa(port); got != want {
		t.Errorf("breakwater container port %q, config listens on %s", got, want)
	}
	if got, want := parts[0], "127.0.0.1"; len(parts) != 3 || got != want {
		t.Errorf("breakwater port mapping %q: want it bound to host %s", bw.Ports[0], want)
	}

	host, qport := hostPort(t, "vector.qdrant.url", cfg.Vector.Qdrant.URL)
	if _, ok := c.Services[host]; !ok || qport != 6334 {
		t.Errorf("vector.qdrant.url = %q, want the qdrant service's gRPC port (qdrant:6334)", cfg.Vector.Qdrant.URL)
	}
	for _, env := range cfg.secretEnvs() {
		if _, ok := bw.Environment[env]; !ok {
			t.Errorf("config reads $%s, the breakwater service does not pass it", env)
		}
	}
	for name, s := range c.Services {
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
	var qdrantVolume bool
	for _, v := range c.Services["qdrant"].Volumes {
		name, path, _ := strings.Cut(v, ":")
		_, declared := c.Volumes[name]
		qdrantVolume = qdrantVolume || (declared && path == "/qdrant/storage")
	}
	if !qdrantVolume {
		t.Errorf("qdrant service does not keep /qdrant/storage on a named volume")
	}
}

// TestComposeFleet checks the "fleet" profile: with the breakwater service,
// three sidecars of the same image, command and config on the one Qdrant,
// each passed the same partition secret (replicas with different secrets
// refuse to share a collection), each on its own loopback host port and its
// own data volume.
func TestComposeFleet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatalf("read docker-compose.yml: %v", err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	first := c.Services["breakwater"]
	if len(first.Profiles) != 0 {
		t.Fatalf("the breakwater service has profiles %v; it must start with and without the fleet profile", first.Profiles)
	}
	var fleet []string
	for name, s := range c.Services {
		if slices.Contains(s.Profiles, "fleet") && name != "redis" {
			fleet = append(fleet, name)
		}
	}
	// The fleet's Redis keeps the budgets of all three; every sidecar is
	// given its URL the same way.
	if r, ok := c.Services["redis"]; !ok || !slices.Contains(r.Profiles, "fleet") {
		t.Errorf("no redis service in the fleet profile")
	}
	if v, ok := first.Environment["BREAKWATER_REDIS_URL"]; !ok || v == "" {
		t.Errorf("breakwater does not pass BREAKWATER_REDIS_URL")
	}
	slices.Sort(fleet)
	if len(fleet) != 2 {
		t.Fatalf("fleet profile services = %v, want two more sidecars (three with breakwater)", fleet)
	}
	cfg := parseConfig(t, c.Configs[first.Configs[0].Source].Content)
	if cfg.Vector.Backend != "qdrant" || cfg.Cache.PartitionSecretEnv == "" {
		t.Fatalf("a fleet needs vector.backend = \"qdrant\" and cache.partition_secret_env; the config has %q and %q", cfg.Vector.Backend, cfg.Cache.PartitionSecretEnv)
	}
	hostPorts := map[string]string{first.Ports[0]: "breakwater"}
	volumes := map[string]string{}
	for _, v := range first.Volumes {
		name, _, _ := strings.Cut(v, ":")
		volumes[name] = "breakwater"
	}
	_, port := hostPort(t, "[server] listen", cfg.Server.Listen)
	for _, name := range fleet {
		s := c.Services[name]
		if s.Image != first.Image || !slices.Equal(s.Command, first.Command) {
			t.Errorf("%s runs %s %v, want breakwater's %s %v", name, s.Image, s.Command, first.Image, first.Command)
		}
		if len(s.Configs) != 1 || s.Configs[0] != first.Configs[0] {
			t.Errorf("%s configs = %v, want breakwater's %v", name, s.Configs, first.Configs)
		}
		if _, ok := s.DependsOn["qdrant"]; !ok {
			t.Errorf("%s does not depend on qdrant", name)
		}
		for env, v := range first.Environment {
			if got, ok := s.Environment[env]; !ok || (env == cfg.Cache.PartitionSecretEnv && got != v) {
				t.Errorf("%s passes $%s as %q, want it as breakwater does (%q)", name, env, got, v)
			}
		}
		if len(s.Ports) != 1 {
			t.Fatalf("%s ports = %v, want one mapping", name, s.Ports)
		}
		parts := strings.Split(s.Ports[0], ":")
		if len(parts) != 3 || parts[0] != "127.0.0.1" || parts[2] != strconv.Itoa(port) {
			t.Errorf("%s port mapping %q: want 127.0.0.1:<host port>:%d", name, s.Ports[0], port)
		}
		if other, dup := hostPorts[parts[0]+":"+parts[1]+":"+parts[2]]; dup {
			t.Errorf("%s and %s publish the same host port", name, other)
		}
		hostPorts[s.Ports[0]] = name
		var data bool
		for _, v := range s.Volumes {
			vol, path, _ := strings.Cut(v, ":")
			_, declared := c.Volumes[vol]
			if other, dup := volumes[vol]; dup {
				t.Errorf("%s and %s share volume %s: each replica keeps its own data_dir", name, other, vol)
			}
			volumes[vol] = name
			data = data || (declared && path == cfg.Cache.DataDir)
		}
		if !data {
			t.Errorf("%s does not keep %s on a named volume of its own", name, cfg.Cache.DataDir)
		}
	}
}

// TestDockerfile checks the image against the manifests: the exposed port,
// a non-root user, no default config (the manifests name theirs).
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatalf("read Dockerfile: %v", err)
	}
	var expose, user, entry, cmd string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), f[0]))
		switch f[0] {
		case "EXPOSE":
			expose = rest
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entry = rest
		case "CMD":
			cmd = rest
		}
	}
	d := one(t, manifests(t), "Deployment")
	bw := sidecar(t, d)
	tests := []struct {
		name, got, want string
	}{
		{"EXPOSE", expose, strconv.Itoa(bw.Ports[0].ContainerPort)},
		{"ENTRYPOINT", entry, `["/breakwater"]`},
		// No CMD: the image runs on environment variables alone, and the
		// manifests pass -config for their file.
		{"CMD", cmd, ""},
	}
	if len(bw.Args) != 2 || bw.Args[0] != "-config" {
		t.Errorf("sidecar args %q, want -config FILE (the image has no default config)", bw.Args)
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("Dockerfile %s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("Dockerfile USER = %q, want a non-root user", user)
	}
}
