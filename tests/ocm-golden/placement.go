package main

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kevents "k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"

	clusterfake "open-cluster-management.io/api/client/cluster/clientset/versioned/fake"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	clusterapiv1 "open-cluster-management.io/api/cluster/v1"
	clusterapiv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterapiv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterapiv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	"open-cluster-management.io/ocm/pkg/placement/controllers/framework"
	"open-cluster-management.io/ocm/pkg/placement/controllers/metrics"
	"open-cluster-management.io/ocm/pkg/placement/controllers/scheduling"
	"open-cluster-management.io/ocm/pkg/placement/plugins/addon"
	"open-cluster-management.io/ocm/pkg/placement/plugins/tainttoleration"
)

const (
	placementNS   = "default"
	placementName = "placement"
	clusterSetKey = "cluster.open-cluster-management.io/clusterset"
)

type conditionOut struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type decisionOut struct {
	ClusterName string `json:"clusterName"`
	Reason      string `json:"reason"`
}

type decisionGroupOut struct {
	DecisionGroupIndex int32    `json:"decisionGroupIndex"`
	DecisionGroupName  string   `json:"decisionGroupName"`
	Clusters           []string `json:"clusters"`
	// Extra: the PlacementDecision names and count OCM writes in the group status.
	Decisions     []string `json:"decisions"`
	ClustersCount int32    `json:"clustersCount"`
}

type placementDecisionOut struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels"`
	Clusters []string          `json:"clusters"`
}

type prioritizerOut struct {
	Name   string           `json:"name"`
	Weight int32            `json:"weight"`
	Scores map[string]int64 `json:"scores"`
}

type filterOut struct {
	Name     string   `json:"name"`
	Clusters []string `json:"clusters"`
}

type placementExpected struct {
	Decisions                []decisionOut           `json:"decisions"`
	Scores                   map[string]int64        `json:"scores"`
	DecisionGroups           []decisionGroupOut      `json:"decisionGroups"`
	Conditions               map[string]conditionOut `json:"conditions"`
	NumberOfSelectedClusters int32                   `json:"numberOfSelectedClusters"`
	// Extras beyond the shared format.
	ScheduledClusters  []string               `json:"scheduledClusters"`
	PlacementDecisions []placementDecisionOut `json:"placementDecisions"`
	PrioritizerScores  []prioritizerOut       `json:"prioritizerScores"`
	FilterResults      []filterOut            `json:"filterResults"`
	RequeueTime        *string                `json:"requeueTime"`
}

type placementCase struct {
	Name                 string                                        `json:"name"`
	Now                  string                                        `json:"now"`
	Clusters             []*clusterapiv1.ManagedCluster                `json:"clusters"`
	ClusterSets          []*clusterapiv1beta2.ManagedClusterSet        `json:"clusterSets"`
	Bindings             []*clusterapiv1beta2.ManagedClusterSetBinding `json:"bindings"`
	AddOnPlacementScores []*clusterapiv1alpha1.AddOnPlacementScore     `json:"addOnPlacementScores"`
	Placement            *clusterapiv1beta1.Placement                  `json:"placement"`
	ExistingDecisions    []*clusterapiv1beta1.PlacementDecision        `json:"existingDecisions"`
	OtherDecisions       []*clusterapiv1beta1.PlacementDecision        `json:"otherDecisions"`
	Expected             placementExpected                             `json:"expected"`
}

// capturingScheduler runs OCM's plugin scheduler and keeps its result.
type capturingScheduler struct {
	inner  scheduling.Scheduler
	result scheduling.ScheduleResult
	status *framework.Status
}

func (s *capturingScheduler) Schedule(ctx context.Context, p *clusterapiv1beta1.Placement, clusters []*clusterapiv1.ManagedCluster) (scheduling.ScheduleResult, *framework.Status) {
	s.result, s.status = s.inner.Schedule(ctx, p, clusters)
	return s.result, s.status
}

var (
	typeCluster    = metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1", Kind: "ManagedCluster"}
	typeClusterSet = metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1beta2", Kind: "ManagedClusterSet"}
	typeBinding    = metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1beta2", Kind: "ManagedClusterSetBinding"}
	typeScore      = metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1alpha1", Kind: "AddOnPlacementScore"}
	typePlacement  = metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1beta1", Kind: "Placement"}
	typeDecision   = metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1beta1", Kind: "PlacementDecision"}
)

func runPlacement(c placementCase) (placementCase, error) {
	fake := testingclock.NewFakeClock(now)
	tainttoleration.TolerationClock = fake
	addon.AddOnClock = fake
	c.Now = *rfc3339(&now)
	if c.Clusters == nil {
		c.Clusters = []*clusterapiv1.ManagedCluster{}
	}
	if c.AddOnPlacementScores == nil {
		c.AddOnPlacementScores = []*clusterapiv1alpha1.AddOnPlacementScore{}
	}

	var objs []runtime.Object
	for _, o := range c.Clusters {
		objs = append(objs, o)
	}
	for _, o := range c.ClusterSets {
		objs = append(objs, o)
	}
	for _, o := range c.Bindings {
		objs = append(objs, o)
	}
	for _, o := range c.AddOnPlacementScores {
		objs = append(objs, o)
	}
	objs = append(objs, c.Placement)
	for _, o := range c.ExistingDecisions {
		objs = append(objs, o)
	}
	for _, o := range c.OtherDecisions {
		objs = append(objs, o)
	}
	// Objects go to the fake client (which OCM writes through) as deep copies, and to
	// the informer stores (which OCM reads through).
	var clientObjs []runtime.Object
	for _, o := range objs {
		clientObjs = append(clientObjs, o.DeepCopyObject())
	}
	client := clusterfake.NewSimpleClientset(clientObjs...)
	informers := clusterinformers.NewSharedInformerFactory(client, 0)
	for _, o := range objs {
		o = o.DeepCopyObject()
		var err error
		switch o.(type) {
		case *clusterapiv1.ManagedCluster:
			err = informers.Cluster().V1().ManagedClusters().Informer().GetStore().Add(o)
		case *clusterapiv1beta2.ManagedClusterSet:
			err = informers.Cluster().V1beta2().ManagedClusterSets().Informer().GetStore().Add(o)
		case *clusterapiv1beta2.ManagedClusterSetBinding:
			err = informers.Cluster().V1beta2().ManagedClusterSetBindings().Informer().GetStore().Add(o)
		case *clusterapiv1alpha1.AddOnPlacementScore:
			err = informers.Cluster().V1alpha1().AddOnPlacementScores().Informer().GetStore().Add(o)
		case *clusterapiv1beta1.Placement:
			err = informers.Cluster().V1beta1().Placements().Informer().GetStore().Add(o)
		case *clusterapiv1beta1.PlacementDecision:
			err = informers.Cluster().V1beta1().PlacementDecisions().Informer().GetStore().Add(o)
		}
		if err != nil {
			return c, err
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recorder := &kevents.FakeRecorder{} // nil channel: events are dropped
	metricsRecorder := metrics.NewScheduleMetrics(fake)
	handle := scheduling.NewSchedulerHandler(
		client,
		informers.Cluster().V1beta1().PlacementDecisions().Lister(),
		informers.Cluster().V1alpha1().AddOnPlacementScores().Lister(),
		informers.Cluster().V1().ManagedClusters().Lister(),
		recorder, metricsRecorder)
	sched := &capturingScheduler{inner: scheduling.NewPluginScheduler(handle)}

	// The requeue instant, from the same filter the scheduler asks (its own answer is a
	// duration from the wall clock, which a fixture cannot hold).
	if r, _ := tainttoleration.New(handle).RequeueAfter(ctx, c.Placement); r.RequeueTime != nil {
		c.Expected.RequeueTime = rfc3339(r.RequeueTime)
	}

	ctrl := scheduling.NewSchedulingController(ctx, client,
		informers.Cluster().V1().ManagedClusters(),
		informers.Cluster().V1beta2().ManagedClusterSets(),
		informers.Cluster().V1beta2().ManagedClusterSetBindings(),
		informers.Cluster().V1beta1().Placements(),
		informers.Cluster().V1beta1().PlacementDecisions(),
		informers.Cluster().V1alpha1().AddOnPlacementScores(),
		sched, recorder, metricsRecorder)
	// The sync reports scheduling failures as errors; the conditions it wrote carry them.
	_ = ctrl.Sync(ctx, nil, placementNS+"/"+placementName)

	// Decisions as written to the PlacementDecisions, in name order (-decision-1, -2, ...).
	pds, err := client.ClusterV1beta1().PlacementDecisions(placementNS).List(ctx, metav1.ListOptions{
		LabelSelector: clusterapiv1beta1.PlacementLabel + "=" + placementName,
	})
	if err != nil {
		return c, err
	}
	items := pds.Items
	sort.Slice(items, func(i, j int) bool { return decisionIndex(items[i].Name) < decisionIndex(items[j].Name) })
	byName := map[string][]string{}
	c.Expected.Decisions = []decisionOut{}
	c.Expected.PlacementDecisions = []placementDecisionOut{}
	for _, pd := range items {
		names := []string{}
		for _, d := range pd.Status.Decisions {
			c.Expected.Decisions = append(c.Expected.Decisions, decisionOut{ClusterName: d.ClusterName, Reason: d.Reason})
			names = append(names, d.ClusterName)
		}
		byName[pd.Name] = names
		c.Expected.PlacementDecisions = append(c.Expected.PlacementDecisions, placementDecisionOut{Name: pd.Name, Labels: pd.Labels, Clusters: names})
	}

	p, err := client.ClusterV1beta1().Placements(placementNS).Get(ctx, placementName, metav1.GetOptions{})
	if err != nil {
		return c, err
	}
	c.Expected.NumberOfSelectedClusters = p.Status.NumberOfSelectedClusters
	c.Expected.DecisionGroups = []decisionGroupOut{}
	for _, g := range p.Status.DecisionGroups {
		out := decisionGroupOut{DecisionGroupIndex: g.DecisionGroupIndex, DecisionGroupName: g.DecisionGroupName,
			Clusters: []string{}, Decisions: g.Decisions, ClustersCount: g.ClustersCount}
		for _, n := range g.Decisions {
			out.Clusters = append(out.Clusters, byName[n]...)
		}
		c.Expected.DecisionGroups = append(c.Expected.DecisionGroups, out)
	}
	c.Expected.Conditions = map[string]conditionOut{}
	for _, cond := range p.Status.Conditions {
		c.Expected.Conditions[cond.Type] = conditionOut{Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message}
	}

	c.Expected.Scores = map[string]int64{}
	c.Expected.ScheduledClusters = []string{}
	c.Expected.PrioritizerScores = []prioritizerOut{}
	c.Expected.FilterResults = []filterOut{}
	if sched.result != nil {
		for k, v := range sched.result.PrioritizerScores() {
			c.Expected.Scores[k] = v
		}
		for _, d := range sched.result.Decisions() {
			c.Expected.ScheduledClusters = append(c.Expected.ScheduledClusters, d.Name)
		}
		for _, r := range sched.result.PrioritizerResults() {
			c.Expected.PrioritizerScores = append(c.Expected.PrioritizerScores, prioritizerOut{Name: r.Name, Weight: r.Weight, Scores: r.Scores})
		}
		sort.Slice(c.Expected.PrioritizerScores, func(i, j int) bool {
			return c.Expected.PrioritizerScores[i].Name < c.Expected.PrioritizerScores[j].Name
		})
		for _, f := range sched.result.FilterResults() {
			names := append([]string{}, f.FilteredClusters...)
			sort.Strings(names)
			c.Expected.FilterResults = append(c.Expected.FilterResults, filterOut{Name: f.Name, Clusters: names})
		}
	}
	return c, nil
}

func decisionIndex(name string) int {
	i := strings.LastIndex(name, "-")
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return 1 << 30
	}
	return n
}

// ---- input generation ----

var (
	envs      = []string{"prod", "dev", "staging"}
	regions   = []string{"us-east", "us-west", "eu-central"}
	tiers     = []string{"gold", "silver"}
	platforms = []string{"AWS", "GCP", "Azure"}
	taintKeys = []string{"gpu", "maintenance", "cluster.open-cluster-management.io/unreachable", "cluster.open-cluster-management.io/unavailable"}
	effects   = []clusterapiv1.TaintEffect{clusterapiv1.TaintEffectNoSelect, clusterapiv1.TaintEffectPreferNoSelect, clusterapiv1.TaintEffectNoSelectIfNew}
	setNames  = []string{"set-a", "set-b", "set-c"}
	scoreRes  = []string{"cpu-score", "mem-score"}
)

func ago(d time.Duration) metav1.Time { return metav1.Time{Time: now.Add(-d)} }

func randCluster(rng *rand.Rand, name string, taintBias int) *clusterapiv1.ManagedCluster {
	c := &clusterapiv1.ManagedCluster{TypeMeta: typeCluster, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	c.Spec.HubAcceptsClient = true
	if rng.Intn(10) < 9 {
		c.Labels[clusterSetKey] = pick(rng, setNames...)
	}
	if rng.Intn(10) < 7 {
		c.Labels["env"] = pick(rng, envs...)
	}
	if rng.Intn(10) < 6 {
		c.Labels["region"] = pick(rng, regions...)
	}
	if rng.Intn(10) < 4 {
		c.Labels["tier"] = pick(rng, tiers...)
	}
	if rng.Intn(2) == 0 {
		c.Status.ClusterClaims = append(c.Status.ClusterClaims, clusterapiv1.ManagedClusterClaim{Name: "platform.open-cluster-management.io", Value: pick(rng, platforms...)})
	}
	if rng.Intn(2) == 0 {
		c.Status.ClusterClaims = append(c.Status.ClusterClaims, clusterapiv1.ManagedClusterClaim{Name: "region.open-cluster-management.io", Value: pick(rng, regions...)})
	}
	if rng.Intn(3) == 0 {
		c.Status.ClusterClaims = append(c.Status.ClusterClaims, clusterapiv1.ManagedClusterClaim{Name: "id.k8s.io", Value: name + "-id"})
	}
	if rng.Intn(2) == 0 {
		c.Status.Version.Kubernetes = pick(rng, "v1.29.3", "v1.30.1", "v1.31.0")
	}
	c.Status.Allocatable = clusterapiv1.ResourceList{}
	c.Status.Capacity = clusterapiv1.ResourceList{}
	if rng.Intn(10) < 8 {
		a := pick(rng, "2", "4", "3500m", "8", "16", "1500m", "4")
		c.Status.Allocatable[clusterapiv1.ResourceCPU] = resource.MustParse(a)
		if rng.Intn(10) > 0 {
			c.Status.Capacity[clusterapiv1.ResourceCPU] = resource.MustParse(pick(rng, "16", "32"))
		}
	}
	if rng.Intn(10) < 8 {
		a := pick(rng, "4Gi", "8Gi", "16Gi", "7680Mi", "32Gi", "1000M", "8Gi")
		c.Status.Allocatable[clusterapiv1.ResourceMemory] = resource.MustParse(a)
		if rng.Intn(10) > 0 {
			c.Status.Capacity[clusterapiv1.ResourceMemory] = resource.MustParse(pick(rng, "32Gi", "64Gi"))
		}
	}
	if rng.Intn(10) < 2+taintBias {
		for i := 0; i < 1+rng.Intn(2); i++ {
			t := clusterapiv1.Taint{
				Key:    pick(rng, taintKeys...),
				Value:  pick(rng, "", "true", "a"),
				Effect: pick(rng, effects...),
			}
			if rng.Intn(10) > 0 {
				t.TimeAdded = ago(pick(rng, 0, 30*time.Second, 59*time.Second, 60*time.Second, 61*time.Second, 5*time.Minute, time.Hour))
			}
			c.Spec.Taints = append(c.Spec.Taints, t)
		}
	}
	if rng.Intn(20) == 0 {
		ts := ago(time.Minute)
		c.DeletionTimestamp = &ts
		c.Finalizers = []string{"cluster.open-cluster-management.io/api-resource-cleanup"}
	}
	return c
}

func clusterSet(name string, sel *clusterapiv1beta2.ManagedClusterSelector) *clusterapiv1beta2.ManagedClusterSet {
	s := &clusterapiv1beta2.ManagedClusterSet{TypeMeta: typeClusterSet, ObjectMeta: metav1.ObjectMeta{Name: name}}
	if sel == nil {
		s.Spec.ClusterSelector = clusterapiv1beta2.ManagedClusterSelector{SelectorType: clusterapiv1beta2.ExclusiveClusterSetLabel}
	} else {
		s.Spec.ClusterSelector = *sel
	}
	return s
}

func binding(ns, name string) *clusterapiv1beta2.ManagedClusterSetBinding {
	return &clusterapiv1beta2.ManagedClusterSetBinding{TypeMeta: typeBinding,
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       clusterapiv1beta2.ManagedClusterSetBindingSpec{ClusterSet: name}}
}

func decision(ns, placement, name string, groupIndex int, groupName string, clusters []string) *clusterapiv1beta1.PlacementDecision {
	d := &clusterapiv1beta1.PlacementDecision{TypeMeta: typeDecision, ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels: map[string]string{
			clusterapiv1beta1.PlacementLabel:          placement,
			clusterapiv1beta1.DecisionGroupIndexLabel: strconv.Itoa(groupIndex),
			clusterapiv1beta1.DecisionGroupNameLabel:  groupName,
		},
	}}
	d.Status.Decisions = []clusterapiv1beta1.ClusterDecision{}
	for _, c := range clusters {
		d.Status.Decisions = append(d.Status.Decisions, clusterapiv1beta1.ClusterDecision{ClusterName: c})
	}
	return d
}

func randLabelSelector(rng *rand.Rand) metav1.LabelSelector {
	var s metav1.LabelSelector
	switch rng.Intn(6) {
	case 0:
		s.MatchLabels = map[string]string{"env": pick(rng, envs...)}
	case 1:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{pick(rng, regions...), pick(rng, regions...)}}}
	case 2:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{pick(rng, envs...)}}}
	case 3:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: pick(rng, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist)}}
	case 4:
		s.MatchLabels = map[string]string{"env": pick(rng, envs...)}
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpExists}}
	}
	return s
}

func randClaimSelector(rng *rand.Rand) clusterapiv1beta1.ClusterClaimSelector {
	var s clusterapiv1beta1.ClusterClaimSelector
	switch rng.Intn(4) {
	case 0:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "platform.open-cluster-management.io", Operator: metav1.LabelSelectorOpIn, Values: []string{pick(rng, platforms...)}}}
	case 1:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "region.open-cluster-management.io", Operator: pick(rng, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist)}}
	case 2:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "region.open-cluster-management.io", Operator: metav1.LabelSelectorOpNotIn, Values: []string{pick(rng, regions...)}}}
	}
	return s
}

var celPool = []string{
	`managedCluster.metadata.labels["env"] == "prod"`,
	`managedCluster.metadata.labels["env"] in ["prod", "staging"]`,
	`managedCluster.metadata.name.startsWith("c0")`,
	`managedCluster.metadata.name.endsWith("1") || managedCluster.metadata.name.endsWith("2")`,
	`managedCluster.status.clusterClaims.exists(c, c.name == "platform.open-cluster-management.io" && c.value == "AWS")`,
	`managedCluster.status.clusterClaims.exists(c, c.name == "region.open-cluster-management.io")`,
	`managedCluster.scores("cpu-score").exists(s, s.name == "cpu" && s.value > 0)`,
	`managedCluster.scores("mem-score").all(s, s.value >= 20)`,
	`managedCluster.status.version.kubernetes == "v1.30.1"`,
	`semver(managedCluster.status.version.kubernetes.substring(1)).isGreaterThan(semver("1.30.0"))`,
	`quantity(managedCluster.status.allocatable.cpu).isGreaterThan(quantity("3"))`,
	`"tier" in managedCluster.metadata.labels`,
	`size(managedCluster.spec.taints) == 0`,
}

func randPredicate(rng *rand.Rand, celBias bool) clusterapiv1beta1.ClusterPredicate {
	var p clusterapiv1beta1.ClusterPredicate
	if !celBias || rng.Intn(2) == 0 {
		switch rng.Intn(4) {
		case 0:
			p.RequiredClusterSelector.LabelSelector = randLabelSelector(rng)
			p.RequiredClusterSelector.ClaimSelector = randClaimSelector(rng)
		case 1:
			p.RequiredClusterSelector.ClaimSelector = randClaimSelector(rng)
		default:
			p.RequiredClusterSelector.LabelSelector = randLabelSelector(rng)
		}
	}
	if celBias || rng.Intn(6) == 0 {
		for i := 0; i < 1+rng.Intn(2); i++ {
			p.RequiredClusterSelector.CelSelector.CelExpressions = append(p.RequiredClusterSelector.CelSelector.CelExpressions, pick(rng, celPool...))
		}
	}
	return p
}

func randToleration(rng *rand.Rand) clusterapiv1beta1.Toleration {
	t := clusterapiv1beta1.Toleration{}
	switch rng.Intn(5) {
	case 0: // tolerate everything
		t.Operator = clusterapiv1beta1.TolerationOpExists
	case 1:
		t.Key = pick(rng, taintKeys...)
		t.Operator = clusterapiv1beta1.TolerationOpExists
	default:
		t.Key = pick(rng, taintKeys...)
		t.Operator = pick(rng, clusterapiv1beta1.TolerationOpEqual, "")
		t.Value = pick(rng, "", "true", "a")
	}
	if rng.Intn(2) == 0 {
		t.Effect = pick(rng, effects...)
	}
	if rng.Intn(2) == 0 {
		s := int64(pick(rng, 0, 30, 59, 60, 61, 300, 7200))
		t.TolerationSeconds = &s
	}
	return t
}

func builtIn(name string, w int32) clusterapiv1beta1.PrioritizerConfig {
	return clusterapiv1beta1.PrioritizerConfig{ScoreCoordinate: &clusterapiv1beta1.ScoreCoordinate{Type: clusterapiv1beta1.ScoreCoordinateTypeBuiltIn, BuiltIn: name}, Weight: w}
}

func addOnScore(res, score string, w int32) clusterapiv1beta1.PrioritizerConfig {
	return clusterapiv1beta1.PrioritizerConfig{ScoreCoordinate: &clusterapiv1beta1.ScoreCoordinate{Type: clusterapiv1beta1.ScoreCoordinateTypeAddOn,
		AddOn: &clusterapiv1beta1.AddOnScore{ResourceName: res, ScoreName: score}}, Weight: w}
}

func randPrioritizerPolicy(rng *rand.Rand) clusterapiv1beta1.PrioritizerPolicy {
	var pp clusterapiv1beta1.PrioritizerPolicy
	pp.Mode = pick(rng, "", clusterapiv1beta1.PrioritizerPolicyModeAdditive, clusterapiv1beta1.PrioritizerPolicyModeAdditive, clusterapiv1beta1.PrioritizerPolicyModeExact)
	used := map[string]bool{}
	for i := 0; i < rng.Intn(4); i++ {
		w := int32(pick(rng, 0, 1, 1, 2, 3, 5, 10, -1, -2))
		var pc clusterapiv1beta1.PrioritizerConfig
		switch rng.Intn(3) {
		case 0:
			pc = builtIn(pick(rng, "Balance", "Steady", "ResourceAllocatableCPU", "ResourceAllocatableMemory"), w)
		case 1:
			pc = builtIn(pick(rng, "ResourceAllocatableCPU", "ResourceAllocatableMemory"), w)
		default:
			pc = addOnScore(pick(rng, scoreRes...), pick(rng, "cpu", "mem", "missing"), w)
		}
		key := fmt.Sprintf("%v/%v", pc.ScoreCoordinate.BuiltIn, pc.ScoreCoordinate.AddOn)
		if used[key] {
			continue
		}
		used[key] = true
		pp.Configurations = append(pp.Configurations, pc)
	}
	return pp
}

func randScores(rng *rand.Rand, clusters []*clusterapiv1.ManagedCluster) []*clusterapiv1alpha1.AddOnPlacementScore {
	var out []*clusterapiv1alpha1.AddOnPlacementScore
	for _, c := range clusters {
		for _, res := range scoreRes {
			if rng.Intn(3) == 0 {
				continue
			}
			s := &clusterapiv1alpha1.AddOnPlacementScore{TypeMeta: typeScore, ObjectMeta: metav1.ObjectMeta{Namespace: c.Name, Name: res}}
			s.Status.Scores = []clusterapiv1alpha1.AddOnPlacementScoreItem{}
			for _, sn := range []string{"cpu", "mem"} {
				if rng.Intn(4) > 0 {
					s.Status.Scores = append(s.Status.Scores, clusterapiv1alpha1.AddOnPlacementScoreItem{Name: sn, Value: int32(rng.Intn(201) - 100)})
				}
			}
			switch rng.Intn(5) {
			case 0:
				t := metav1.Time{Time: now.Add(time.Hour)}
				s.Status.ValidUntil = &t
			case 1:
				t := ago(time.Minute)
				s.Status.ValidUntil = &t
			case 2:
				t := metav1.Time{Time: now}
				s.Status.ValidUntil = &t
			}
			out = append(out, s)
		}
	}
	return out
}

// randPlacementCase builds one random case; bias picks a theme so that every feature
// is well represented.
func randPlacementCase(rng *rand.Rand, i int) placementCase {
	bias := i % 8
	c := placementCase{Name: fmt.Sprintf("random-%03d", i+1)}
	nClusters := pick(rng, 0, 1, 2, 3, 4, 5, 6, 6, 7, 7, 8, 8, 9, 10, 11, 12, 14)
	if bias == 7 && nClusters < 4 {
		nClusters += 4
	}
	taintBias := 0
	if bias == 2 {
		taintBias = 4
	}
	for k := 0; k < nClusters; k++ {
		c.Clusters = append(c.Clusters, randCluster(rng, fmt.Sprintf("c%02d", k+1), taintBias))
	}
	rng.Shuffle(len(c.Clusters), func(a, b int) { c.Clusters[a], c.Clusters[b] = c.Clusters[b], c.Clusters[a] })

	// Cluster sets and bindings.
	c.ClusterSets = []*clusterapiv1beta2.ManagedClusterSet{}
	for _, n := range setNames {
		if n != "set-c" || rng.Intn(10) < 7 {
			c.ClusterSets = append(c.ClusterSets, clusterSet(n, nil))
		}
	}
	if rng.Intn(5) < 2 {
		c.ClusterSets = append(c.ClusterSets, clusterSet("global", &clusterapiv1beta2.ManagedClusterSelector{
			SelectorType: clusterapiv1beta2.LabelSelector, LabelSelector: &metav1.LabelSelector{}}))
	}
	if rng.Intn(4) == 0 {
		c.ClusterSets = append(c.ClusterSets, clusterSet("prod-set", &clusterapiv1beta2.ManagedClusterSelector{
			SelectorType: clusterapiv1beta2.LabelSelector, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}))
	}
	c.Bindings = []*clusterapiv1beta2.ManagedClusterSetBinding{}
	if bias == 6 && rng.Intn(3) == 0 {
		// no binding at all, or only a binding to a missing set / in another namespace
		switch rng.Intn(3) {
		case 1:
			c.Bindings = append(c.Bindings, binding(placementNS, "missing-set"))
		case 2:
			c.Bindings = append(c.Bindings, binding("other", "set-a"))
		}
	} else {
		for _, n := range []string{"set-a", "set-b", "set-c", "global", "prod-set", "missing-set"} {
			if rng.Intn(10) < 6 {
				c.Bindings = append(c.Bindings, binding(placementNS, n))
			}
		}
		bound := map[string]bool{}
		for _, b := range c.Bindings {
			bound[b.Name] = true
		}
		if !bound["set-a"] && !bound["set-b"] {
			c.Bindings = append(c.Bindings, binding(placementNS, pick(rng, "set-a", "set-b")))
		}
	}

	p := &clusterapiv1beta1.Placement{TypeMeta: typePlacement, ObjectMeta: metav1.ObjectMeta{Namespace: placementNS, Name: placementName, Generation: 1}}
	if rng.Intn(2) == 0 {
		n := int32(1 + rng.Intn(nClusters+2))
		if rng.Intn(15) == 0 {
			n = 0
		}
		p.Spec.NumberOfClusters = &n
	}
	if rng.Intn(8) == 0 || bias == 6 {
		for _, n := range []string{"set-a", "set-b", "global", "prod-set", "missing-set"} {
			if rng.Intn(3) == 0 {
				p.Spec.ClusterSets = append(p.Spec.ClusterSets, n)
			}
		}
		if len(c.Bindings) > 0 && (bias != 6 || rng.Intn(2) == 0) {
			p.Spec.ClusterSets = append(p.Spec.ClusterSets, c.Bindings[len(c.Bindings)-1].Name)
		}
	}
	nPred := pick(rng, 0, 0, 1, 1, 2)
	if bias == 0 || bias == 1 {
		nPred = 1 + rng.Intn(2)
	}
	for k := 0; k < nPred; k++ {
		p.Spec.Predicates = append(p.Spec.Predicates, randPredicate(rng, bias == 1))
	}
	if rng.Intn(3) == 0 || bias == 2 {
		for k := 0; k < 1+rng.Intn(2); k++ {
			p.Spec.Tolerations = append(p.Spec.Tolerations, randToleration(rng))
		}
		if bias == 2 && rng.Intn(2) == 0 {
			// tolerate every taint for a while, so decided clusters bring a requeue time
			s := int64(pick(rng, 60, 300, 7200))
			p.Spec.Tolerations = append(p.Spec.Tolerations, clusterapiv1beta1.Toleration{Operator: clusterapiv1beta1.TolerationOpExists, TolerationSeconds: &s})
		}
	}
	if rng.Intn(3) > 0 || bias == 3 || bias == 4 {
		p.Spec.PrioritizerPolicy = randPrioritizerPolicy(rng)
		if bias == 4 {
			p.Spec.PrioritizerPolicy.Mode = clusterapiv1beta1.PrioritizerPolicyModeExact
		}
	}
	p.Spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup = intstr.FromString("100%")
	if rng.Intn(3) == 0 || bias == 7 {
		p.Spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup = pick(rng,
			intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromInt32(3), intstr.FromInt32(0), intstr.FromInt32(50),
			intstr.FromString("25%"), intstr.FromString("30%"), intstr.FromString("50%"), intstr.FromString("33.3%"), intstr.FromString("0%"), intstr.FromString("100%"))
		for k := 0; k < rng.Intn(3); k++ {
			g := clusterapiv1beta1.DecisionGroup{GroupName: pick(rng, "canary", "prod-group", "east")}
			if rng.Intn(2) == 0 {
				g.ClusterSelector.LabelSelector = randLabelSelector(rng)
			} else {
				g.ClusterSelector.ClaimSelector = randClaimSelector(rng)
			}
			p.Spec.DecisionStrategy.GroupStrategy.DecisionGroups = append(p.Spec.DecisionStrategy.GroupStrategy.DecisionGroups, g)
		}
	}
	c.Placement = p

	// AddOnPlacementScores only where the placement reads them (and now and then as noise).
	usesScores := rng.Intn(6) == 0
	for _, pc := range p.Spec.PrioritizerPolicy.Configurations {
		usesScores = usesScores || pc.ScoreCoordinate.Type == clusterapiv1beta1.ScoreCoordinateTypeAddOn
	}
	for _, pr := range p.Spec.Predicates {
		for _, e := range pr.RequiredClusterSelector.CelSelector.CelExpressions {
			usesScores = usesScores || strings.Contains(e, "scores(")
		}
	}
	if usesScores {
		c.AddOnPlacementScores = randScores(rng, c.Clusters)
	}

	// Existing decisions of this placement.
	c.ExistingDecisions = []*clusterapiv1beta1.PlacementDecision{}
	if rng.Intn(3) == 0 || bias == 5 || bias == 2 {
		var chosen []string
		for _, cl := range c.Clusters {
			if rng.Intn(2) == 0 {
				chosen = append(chosen, cl.Name)
			}
		}
		if rng.Intn(4) == 0 {
			chosen = append(chosen, "gone-cluster")
		}
		sort.Strings(chosen)
		split := len(chosen)
		if split > 1 && rng.Intn(2) == 0 {
			split = len(chosen) / 2
		}
		c.ExistingDecisions = append(c.ExistingDecisions, decision(placementNS, placementName, placementName+"-decision-1", 0, "", chosen[:split]))
		if split < len(chosen) {
			c.ExistingDecisions = append(c.ExistingDecisions, decision(placementNS, placementName, placementName+"-decision-2", 1, "", chosen[split:]))
		}
		if rng.Intn(5) == 0 {
			// a stale extra decision OCM deletes
			c.ExistingDecisions = append(c.ExistingDecisions, decision(placementNS, placementName, placementName+"-decision-9", 8, "", []string{}))
		}
	}

	// Decisions of other placements (Balance input).
	c.OtherDecisions = []*clusterapiv1beta1.PlacementDecision{}
	if rng.Intn(3) == 0 || bias == 5 || bias == 3 {
		others := []struct{ ns, name string }{{placementNS, "other-a"}, {placementNS, "other-b"}, {"team-x", placementName}, {"team-x", "other-c"}}
		for _, o := range others {
			if rng.Intn(2) == 0 {
				continue
			}
			var chosen []string
			for _, cl := range c.Clusters {
				if rng.Intn(2) == 0 {
					chosen = append(chosen, cl.Name)
				}
			}
			sort.Strings(chosen)
			c.OtherDecisions = append(c.OtherDecisions, decision(o.ns, o.name, o.name+"-decision-1", 0, "", chosen))
		}
	}
	return c
}

// handPlacementCases are fixed inputs for misconfiguration and boundary behaviour.
func handPlacementCases(rng *rand.Rand) []placementCase {
	base := func(name string, mutate func(*placementCase)) placementCase {
		c := placementCase{Name: name}
		for k := 0; k < 4; k++ {
			cl := randCluster(rng, fmt.Sprintf("c%02d", k+1), 0)
			cl.Labels[clusterSetKey] = "set-a"
			cl.DeletionTimestamp = nil
			cl.Finalizers = nil
			cl.Spec.Taints = nil
			c.Clusters = append(c.Clusters, cl)
		}
		c.ClusterSets = []*clusterapiv1beta2.ManagedClusterSet{clusterSet("set-a", nil)}
		c.Bindings = []*clusterapiv1beta2.ManagedClusterSetBinding{binding(placementNS, "set-a")}
		c.AddOnPlacementScores = randScores(rng, c.Clusters)
		c.Placement = &clusterapiv1beta1.Placement{TypeMeta: typePlacement, ObjectMeta: metav1.ObjectMeta{Namespace: placementNS, Name: placementName, Generation: 1}}
		c.Placement.Spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup = intstr.FromString("100%")
		c.ExistingDecisions = []*clusterapiv1beta1.PlacementDecision{}
		c.OtherDecisions = []*clusterapiv1beta1.PlacementDecision{}
		mutate(&c)
		return c
	}
	two := int32(2)
	secs := func(s int64) *int64 { return &s }
	taint := func(c *placementCase, idx int, t clusterapiv1.Taint) {
		c.Clusters[idx].Spec.Taints = append(c.Clusters[idx].Spec.Taints, t)
	}
	return []placementCase{
		base("misconfigured-unknown-builtin-prioritizer", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy.Configurations = []clusterapiv1beta1.PrioritizerConfig{builtIn("Spread", 2)}
		}),
		base("unknown-builtin-prioritizer-weight-zero-is-ignored", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy.Configurations = []clusterapiv1beta1.PrioritizerConfig{builtIn("Spread", 0)}
		}),
		base("misconfigured-unknown-prioritizer-exact", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy = clusterapiv1beta1.PrioritizerPolicy{Mode: clusterapiv1beta1.PrioritizerPolicyModeExact,
				Configurations: []clusterapiv1beta1.PrioritizerConfig{builtIn("ResourceRatioCPU", 1)}}
		}),
		base("misconfigured-addon-coordinate-without-addon", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy.Configurations = []clusterapiv1beta1.PrioritizerConfig{
				{ScoreCoordinate: &clusterapiv1beta1.ScoreCoordinate{Type: clusterapiv1beta1.ScoreCoordinateTypeAddOn}, Weight: 1}}
		}),
		base("misconfigured-missing-score-coordinate", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy.Configurations = []clusterapiv1beta1.PrioritizerConfig{{Weight: 1}}
		}),
		base("misconfigured-unknown-prioritizer-mode", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy.Mode = "Bogus"
		}),
		base("misconfigured-exists-toleration-with-value", func(c *placementCase) {
			taint(c, 0, clusterapiv1.Taint{Key: "gpu", Value: "true", Effect: clusterapiv1.TaintEffectNoSelect, TimeAdded: ago(time.Hour)})
			c.Placement.Spec.Tolerations = []clusterapiv1beta1.Toleration{{Key: "gpu", Operator: clusterapiv1beta1.TolerationOpExists, Value: "true"}}
		}),
		base("misconfigured-empty-key-toleration-equal", func(c *placementCase) {
			taint(c, 0, clusterapiv1.Taint{Key: "gpu", Value: "true", Effect: clusterapiv1.TaintEffectNoSelect, TimeAdded: ago(time.Hour)})
			c.Placement.Spec.Tolerations = []clusterapiv1beta1.Toleration{{Operator: clusterapiv1beta1.TolerationOpEqual, Value: "true"}}
		}),
		base("misconfigured-exists-toleration-with-value-no-taints", func(c *placementCase) {
			c.Placement.Spec.Tolerations = []clusterapiv1beta1.Toleration{{Key: "gpu", Operator: clusterapiv1beta1.TolerationOpExists, Value: "x"}}
		}),
		base("exists-toleration-with-value-but-no-candidates-is-not-checked", func(c *placementCase) {
			c.Placement.Spec.Tolerations = []clusterapiv1beta1.Toleration{{Key: "gpu", Operator: clusterapiv1beta1.TolerationOpExists, Value: "x"}}
			c.Placement.Spec.Predicates = []clusterapiv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterapiv1beta1.ClusterSelector{
				LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "nowhere"}}}}}
		}),
		base("prefer-no-select-never-filters", func(c *placementCase) {
			taint(c, 0, clusterapiv1.Taint{Key: "gpu", Effect: clusterapiv1.TaintEffectPreferNoSelect, TimeAdded: ago(time.Hour)})
			taint(c, 1, clusterapiv1.Taint{Key: "gpu", Value: "a", Effect: clusterapiv1.TaintEffectNoSelect, TimeAdded: ago(time.Hour)})
			c.Placement.Spec.Tolerations = []clusterapiv1beta1.Toleration{{Key: "gpu", Value: "b"}}
		}),
		base("misconfigured-cel-does-not-compile", func(c *placementCase) {
			c.Placement.Spec.Predicates = []clusterapiv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterapiv1beta1.ClusterSelector{
				CelSelector: clusterapiv1beta1.ClusterCelSelector{CelExpressions: []string{`managedCluster.metadata.name ==`}}}}}
		}),
		base("misconfigured-cel-not-boolean-matches-nothing", func(c *placementCase) {
			c.Placement.Spec.Predicates = []clusterapiv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterapiv1beta1.ClusterSelector{
				CelSelector: clusterapiv1beta1.ClusterCelSelector{CelExpressions: []string{`managedCluster.metadata.name`}}}}}
		}),
		base("misconfigured-bad-label-selector-operator", func(c *placementCase) {
			c.Placement.Spec.Predicates = []clusterapiv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterapiv1beta1.ClusterSelector{
				LabelSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Like", Values: []string{"p"}}}}}}}
		}),
		base("misconfigured-clusters-per-group-not-percent", func(c *placementCase) {
			c.Placement.Spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup = intstr.FromString("3")
			c.ExistingDecisions = []*clusterapiv1beta1.PlacementDecision{decision(placementNS, placementName, placementName+"-decision-1", 0, "", []string{"c01", "c02"})}
		}),
		base("misconfigured-group-selector-bad-operator", func(c *placementCase) {
			c.Placement.Spec.DecisionStrategy.GroupStrategy.DecisionGroups = []clusterapiv1beta1.DecisionGroup{{GroupName: "canary",
				ClusterSelector: clusterapiv1beta1.GroupClusterSelector{LabelSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}}}}
		}),
		base("toleration-seconds-boundary", func(c *placementCase) {
			taint(c, 0, clusterapiv1.Taint{Key: "maintenance", Effect: clusterapiv1.TaintEffectNoSelect, TimeAdded: ago(60 * time.Second)})
			taint(c, 1, clusterapiv1.Taint{Key: "maintenance", Effect: clusterapiv1.TaintEffectNoSelect, TimeAdded: ago(59 * time.Second)})
			taint(c, 2, clusterapiv1.Taint{Key: "maintenance", Effect: clusterapiv1.TaintEffectNoSelect, TimeAdded: ago(61 * time.Second)})
			c.Placement.Spec.Tolerations = []clusterapiv1beta1.Toleration{{Key: "maintenance", Operator: clusterapiv1beta1.TolerationOpExists, TolerationSeconds: secs(60)}}
			c.ExistingDecisions = []*clusterapiv1beta1.PlacementDecision{decision(placementNS, placementName, placementName+"-decision-1", 0, "", []string{"c01", "c02", "c03"})}
		}),
		base("no-select-if-new-keeps-decided-cluster", func(c *placementCase) {
			taint(c, 0, clusterapiv1.Taint{Key: "cluster.open-cluster-management.io/unreachable", Effect: clusterapiv1.TaintEffectNoSelectIfNew, TimeAdded: ago(time.Minute)})
			taint(c, 1, clusterapiv1.Taint{Key: "cluster.open-cluster-management.io/unreachable", Effect: clusterapiv1.TaintEffectNoSelectIfNew, TimeAdded: ago(time.Minute)})
			c.ExistingDecisions = []*clusterapiv1beta1.PlacementDecision{decision(placementNS, placementName, placementName+"-decision-1", 0, "", []string{"c01"})}
		}),
		base("steady-keeps-existing-with-number-of-clusters", func(c *placementCase) {
			c.Placement.Spec.NumberOfClusters = &two
			c.ExistingDecisions = []*clusterapiv1beta1.PlacementDecision{decision(placementNS, placementName, placementName+"-decision-1", 0, "", []string{"c03", "c04"})}
		}),
		base("balance-against-other-placements", func(c *placementCase) {
			c.Placement.Spec.NumberOfClusters = &two
			c.OtherDecisions = []*clusterapiv1beta1.PlacementDecision{
				decision(placementNS, "other-a", "other-a-decision-1", 0, "", []string{"c01", "c02", "c03"}),
				decision(placementNS, "other-b", "other-b-decision-1", 0, "", []string{"c01", "c02"}),
				decision("team-x", placementName, placementName+"-decision-1", 0, "", []string{"c01"}),
			}
		}),
		base("more-than-100-decisions-split", func(c *placementCase) {
			c.Clusters = nil
			for k := 0; k < 230; k++ {
				c.Clusters = append(c.Clusters, &clusterapiv1.ManagedCluster{TypeMeta: typeCluster, ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("m%03d", k), Labels: map[string]string{clusterSetKey: "set-a", "env": pick(rng, envs...)}}})
			}
			c.AddOnPlacementScores = []*clusterapiv1alpha1.AddOnPlacementScore{}
			c.Placement.Spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup = intstr.FromString("60%")
			c.Placement.Spec.DecisionStrategy.GroupStrategy.DecisionGroups = []clusterapiv1beta1.DecisionGroup{{GroupName: "prod",
				ClusterSelector: clusterapiv1beta1.GroupClusterSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}}
		}),
		base("decision-groups-overlapping-selectors", func(c *placementCase) {
			for k, cl := range c.Clusters {
				cl.Labels["env"] = []string{"prod", "prod", "dev", "staging"}[k]
			}
			c.Placement.Spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup = intstr.FromInt32(1)
			c.Placement.Spec.DecisionStrategy.GroupStrategy.DecisionGroups = []clusterapiv1beta1.DecisionGroup{
				{GroupName: "prod", ClusterSelector: clusterapiv1beta1.GroupClusterSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}},
				{GroupName: "all", ClusterSelector: clusterapiv1beta1.GroupClusterSelector{}},
			}
		}),
		base("no-bindings", func(c *placementCase) { c.Bindings = []*clusterapiv1beta2.ManagedClusterSetBinding{} }),
		base("no-intersection", func(c *placementCase) { c.Placement.Spec.ClusterSets = []string{"set-z"} }),
		base("all-sets-empty", func(c *placementCase) {
			for _, cl := range c.Clusters {
				cl.Labels[clusterSetKey] = "set-b"
			}
		}),
		base("no-cluster-matched", func(c *placementCase) {
			c.Placement.Spec.Predicates = []clusterapiv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterapiv1beta1.ClusterSelector{
				LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "nowhere"}}}}}
		}),
		base("not-all-decisions-scheduled", func(c *placementCase) {
			n := int32(7)
			c.Placement.Spec.NumberOfClusters = &n
		}),
		base("zero-clusters-requested", func(c *placementCase) {
			n := int32(0)
			c.Placement.Spec.NumberOfClusters = &n
		}),
		base("all-clusters-deleting", func(c *placementCase) {
			for _, cl := range c.Clusters {
				ts := ago(time.Minute)
				cl.DeletionTimestamp = &ts
				cl.Finalizers = []string{"cluster.open-cluster-management.io/api-resource-cleanup"}
			}
		}),
		base("addon-score-expired-is-zero-with-warning", func(c *placementCase) {
			c.Placement.Spec.PrioritizerPolicy = clusterapiv1beta1.PrioritizerPolicy{Mode: clusterapiv1beta1.PrioritizerPolicyModeExact,
				Configurations: []clusterapiv1beta1.PrioritizerConfig{addOnScore("cpu-score", "cpu", 1)}}
			c.AddOnPlacementScores = nil
			for k, cl := range c.Clusters {
				s := &clusterapiv1alpha1.AddOnPlacementScore{TypeMeta: typeScore, ObjectMeta: metav1.ObjectMeta{Namespace: cl.Name, Name: "cpu-score"}}
				s.Status.Scores = []clusterapiv1alpha1.AddOnPlacementScoreItem{{Name: "cpu", Value: int32(10 * (k + 1))}}
				if k%2 == 0 {
					t := ago(time.Second)
					s.Status.ValidUntil = &t
				}
				c.AddOnPlacementScores = append(c.AddOnPlacementScores, s)
			}
		}),
	}
}

func placementCases(rng *rand.Rand) ([]placementCase, error) {
	var out []placementCase
	var inputs []placementCase
	for i := 0; i < 320; i++ {
		inputs = append(inputs, randPlacementCase(rng, i))
	}
	inputs = append(inputs, handPlacementCases(rng)...)
	for _, in := range inputs {
		res, err := runPlacement(in)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", in.Name, err)
		}
		out = append(out, res)
	}
	return out, nil
}
