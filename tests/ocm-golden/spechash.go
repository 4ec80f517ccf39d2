package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	addonutils "open-cluster-management.io/addon-framework/pkg/utils"
)

type specHashCase struct {
	Name string `json:"name"`
	// Object is the config as the API server would serve it (JSON text as given).
	Object json.RawMessage `json:"object"`
	// SpecHash is addon-framework's GetSpecHash of the object decoded the way the
	// dynamic informers decode it (integers int64, other numbers float64).
	SpecHash string `json:"specHash"`
	// HashedJSON (extra) is the byte string whose SHA-256 is SpecHash.
	HashedJSON string `json:"hashedJSON"`
}

// Values with characters JSON encoders treat differently: HTML-special, quotes,
// backslashes, control characters, line/paragraph separators, non-ASCII, emoji.
var trickyStrings = []string{
	"plain",
	"",
	"a<b>c",
	"Tom & Jerry",
	"<script>alert('x')</script>",
	`quote " and backslash \ here`,
	"tab\tnewline\ncarriage\r",
	"bell\u0007 and nul-free control \u001f",
	"line\u2028separator\u2029paragraph",
	"unicode: café, naïve, 日本語, Ελληνικά",
	"emoji 🚀✨",
	"del\u007fchar",
	"http://proxy.example.com:3128/?a=1&b=2",
	"ends with space ",
	"10.0.0.0/8,.svc,.cluster.local,localhost",
}

func ts(rng *rand.Rand) string { return pick(rng, trickyStrings...) }

func randADC(rng *rand.Rand, i int) map[string]interface{} {
	spec := map[string]interface{}{}
	if rng.Intn(3) > 0 {
		var vars []interface{}
		for k := 0; k < 1+rng.Intn(4); k++ {
			vars = append(vars, map[string]interface{}{"name": pick(rng, "LOG_LEVEL", "Image", "feature_gate", "zone", "ÜBER", "a-b.c"), "value": ts(rng)})
		}
		spec["customizedVariables"] = vars
	}
	if rng.Intn(2) == 0 {
		np := map[string]interface{}{}
		if rng.Intn(3) > 0 {
			sel := map[string]interface{}{}
			for k := 0; k < 1+rng.Intn(3); k++ {
				sel[pick(rng, "node-role.kubernetes.io/infra", "kubernetes.io/os", "zone", "Zeta", "alpha", "élan")] = ts(rng)
			}
			np["nodeSelector"] = sel
		}
		if rng.Intn(2) == 0 {
			tol := map[string]interface{}{"key": pick(rng, "node-role.kubernetes.io/infra", "dedicated"), "operator": pick(rng, "Exists", "Equal"), "effect": pick(rng, "NoSchedule", "NoExecute")}
			if tol["operator"] == "Equal" {
				tol["value"] = ts(rng)
			}
			if rng.Intn(2) == 0 {
				tol["tolerationSeconds"] = int64(pick(rng, 0, 30, 3600, 9007199254740993))
			}
			np["tolerations"] = []interface{}{tol}
		}
		spec["nodePlacement"] = np
	}
	if rng.Intn(2) == 0 {
		spec["registries"] = []interface{}{
			map[string]interface{}{"source": "quay.io/open-cluster-management", "mirror": pick(rng, "registry.example.com/ocm", "mirror.local:5000/a&b")},
		}
	}
	if rng.Intn(2) == 0 {
		pc := map[string]interface{}{"httpProxy": pick(rng, "http://proxy:3128", "http://user:p&ss@proxy:3128"), "noProxy": ts(rng)}
		if rng.Intn(2) == 0 {
			pc["httpsProxy"] = "https://proxy:3129"
			pc["caBundle"] = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM+Lzw/PQ=="
		}
		spec["proxyConfig"] = pc
	}
	if rng.Intn(2) == 0 {
		spec["agentInstallNamespace"] = pick(rng, "open-cluster-management-agent-addon", "addon-ns", "")
	}
	if rng.Intn(2) == 0 {
		spec["resourceRequirements"] = []interface{}{map[string]interface{}{
			"containerID": pick(rng, "deployments:*:*", "deployments:helloworld-agent:helloworld-agent", "*:*:*"),
			"resources": map[string]interface{}{
				"limits":   map[string]interface{}{"cpu": pick(rng, "500m", "1"), "memory": pick(rng, "512Mi", "1Gi")},
				"requests": map[string]interface{}{"cpu": "100m", "memory": "128Mi"},
			},
		}}
	}
	meta := map[string]interface{}{
		"name":              fmt.Sprintf("adc-%02d", i),
		"namespace":         pick(rng, "default", "open-cluster-management", "cluster1"),
		"uid":               fmt.Sprintf("0d9c7f2e-1b6a-4c1e-9f3a-%012d", i),
		"resourceVersion":   fmt.Sprint(1000 + rng.Intn(90000)),
		"generation":        int64(1 + rng.Intn(5)),
		"creationTimestamp": "2026-01-15T11:00:00Z",
	}
	if rng.Intn(3) == 0 {
		meta["annotations"] = map[string]interface{}{"note": ts(rng)}
	}
	obj := map[string]interface{}{
		"apiVersion": "addon.open-cluster-management.io/v1alpha1",
		"kind":       "AddOnDeploymentConfig",
		"metadata":   meta,
		"spec":       spec,
	}
	return obj
}

// handSpecHashObjects are JSON texts kept verbatim: numbers, key order, other kinds.
var handSpecHashObjects = []struct{ name, json string }{
	{"adc-empty-spec", `{"apiVersion":"addon.open-cluster-management.io/v1alpha1","kind":"AddOnDeploymentConfig","metadata":{"name":"empty","namespace":"default"},"spec":{}}`},
	{"adc-no-spec", `{"apiVersion":"addon.open-cluster-management.io/v1alpha1","kind":"AddOnDeploymentConfig","metadata":{"name":"nospec","namespace":"default"}}`},
	{"adc-null-spec", `{"apiVersion":"addon.open-cluster-management.io/v1alpha1","kind":"AddOnDeploymentConfig","metadata":{"name":"nullspec","namespace":"default"},"spec":null}`},
	{"adc-status-and-metadata-ignored", `{"apiVersion":"addon.open-cluster-management.io/v1alpha1","kind":"AddOnDeploymentConfig","metadata":{"name":"a","namespace":"default","generation":7,"labels":{"x":"y"}},"spec":{"agentInstallNamespace":"ns"},"status":{"observed":true}}`},
	{"adc-same-spec-other-metadata", `{"apiVersion":"addon.open-cluster-management.io/v1beta1","kind":"AddOnDeploymentConfig","metadata":{"name":"b","namespace":"other","generation":1},"spec":{"agentInstallNamespace":"ns"}}`},
	{"adc-keys-out-of-order", `{"spec":{"proxyConfig":{"noProxy":"b","httpProxy":"a"},"customizedVariables":[{"value":"2","name":"Z"},{"value":"1","name":"a"}],"agentInstallNamespace":"x"},"kind":"AddOnDeploymentConfig","apiVersion":"addon.open-cluster-management.io/v1alpha1","metadata":{"name":"order","namespace":"default"}}`},
	{"adc-html-escaped-input", `{"apiVersion":"addon.open-cluster-management.io/v1alpha1","kind":"AddOnDeploymentConfig","metadata":{"name":"esc","namespace":"default"},"spec":{"customizedVariables":[{"name":"html","value":"\u003cb\u003e \u0026 \u003c/b\u003e"},{"name":"slash","value":"a\/b"},{"name":"uni","value":"\u00e9\ud83d\ude80"}]}}`},
	{"unicode-keys-sort-bytewise", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"zeta":1,"Zeta":2,"_u":3,"é":4,"e":5,"日本":6,"a":{"b":{"c":{"d":[1,{"é":"x","e":"y"}]}}}}}`},
	{"numbers", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"n"},"spec":{"int":42,"neg":-7,"zero":0,"float":1.5,"wholeFloat":1.0,"exp":1e3,"small":0.000001,"tiny":1e-7,"big":123456789012345678,"bigger":12345678901234567890,"huge":1e21,"justUnderHuge":999999999999999900000,"negZero":-0.0,"third":0.3333333333333333}}`},
	{"bools-nulls-empties", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"t":true,"f":false,"n":null,"emptyList":[],"emptyMap":{},"listOfNull":[null],"nested":{"emptyString":""}}}`},
	{"configmap-data", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default","resourceVersion":"5"},"data":{"config.yaml":"a: 1\nb: <two>\n","script.sh":"#!/bin/sh\necho \"hi\" && exit 0\n"},"binaryData":{"blob":"AAEC"}}`},
	{"secret-several-top-level-fields", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"default"},"type":"Opaque","data":{"password":"cGFzcw=="},"stringData":{"user":"admin & co"},"immutable":false}`},
	{"addontemplate", `{"apiVersion":"addon.open-cluster-management.io/v1alpha1","kind":"AddOnTemplate","metadata":{"name":"hello-template"},"spec":{"addonName":"hello","agentSpec":{"workload":{"manifests":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"hello-agent","namespace":"{{AGENT_NAMESPACE}}"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"hello"}},"template":{"metadata":{"labels":{"app":"hello"}},"spec":{"containers":[{"name":"agent","image":"quay.io/x/hello:latest","args":["--cluster={{CLUSTER_NAME}}","--hub-kubeconfig=/var/run/hub/kubeconfig"]}]}}}}]}},"registration":[{"type":"KubeClient","kubeClient":{"hubPermissions":[{"type":"CurrentCluster","currentCluster":{"clusterRoleName":"cm-admin"}}]}}]}}`},
	{"custom-kind-cluster-scoped", `{"apiVersion":"config.example.io/v1beta1","kind":"LoggingConfig","metadata":{"name":"global","annotations":{"a":"b"}},"spec":{"level":"debug","sinks":[{"type":"stdout"},{"type":"file","path":"/var/log/a&b.log"}],"limits":{"burst":100,"rate":0.5}},"status":{"conditions":[]}}`},
	{"only-status", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"st"},"status":{"phase":"Ready"}}`},
}

func hashOne(name string, raw []byte) (specHashCase, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return specHashCase{}, fmt.Errorf("%s: %w", name, err)
	}
	h, err := addonutils.GetSpecHash(u)
	if err != nil {
		return specHashCase{}, fmt.Errorf("%s: %w", name, err)
	}
	// The bytes hashed, rebuilt the documented way; checked against OCM's answer.
	rest := map[string]interface{}{}
	for k, v := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			rest[k] = v
		}
	}
	hashed, err := json.Marshal(rest)
	if err != nil {
		return specHashCase{}, err
	}
	if fmt.Sprintf("%x", sha256.Sum256(hashed)) != h {
		return specHashCase{}, fmt.Errorf("%s: hashed bytes not reproduced", name)
	}
	return specHashCase{Name: name, Object: json.RawMessage(raw), SpecHash: h, HashedJSON: string(hashed)}, nil
}

func specHashCases(rng *rand.Rand) ([]specHashCase, error) {
	var out []specHashCase
	for i := 0; i < 24; i++ {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(randADC(rng, i+1)); err != nil {
			return nil, err
		}
		c, err := hashOne(fmt.Sprintf("adc-random-%02d", i+1), bytes.TrimSpace(buf.Bytes()))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	for _, h := range handSpecHashObjects {
		c, err := hashOne(h.name, []byte(h.json))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
