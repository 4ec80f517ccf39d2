package main

import (
	"fmt"
	"math/rand"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	testingclock "k8s.io/utils/clock/testing"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1alpha1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
)

type rolloutGroup struct {
	GroupIndex int32    `json:"groupIndex"`
	GroupName  string   `json:"groupName"`
	Clusters   []string `json:"clusters"`
}

type rolloutStatusIn struct {
	ClusterName        string  `json:"clusterName"`
	Status             string  `json:"status"`
	LastTransitionTime *string `json:"lastTransitionTime"`
}

type groupKeyOut struct {
	GroupIndex int32  `json:"groupIndex"`
	GroupName  string `json:"groupName"`
}

type rolloutStatusOut struct {
	ClusterName        string      `json:"clusterName"`
	Status             string      `json:"status"`
	GroupKey           groupKeyOut `json:"groupKey"`
	LastTransitionTime *string     `json:"lastTransitionTime"`
	// TimeOutTime is OCM's RecheckTime: the timeout instant for
	// Progressing/Failed clusters, the end of the soak for Succeeded ones.
	TimeOutTime *string `json:"timeOutTime"`
}

type rolloutExpected struct {
	ClustersToRollout []rolloutStatusOut `json:"clustersToRollout"`
	ClustersTimeOut   []rolloutStatusOut `json:"clustersTimeOut"`
	ClustersRemoved   []rolloutStatusOut `json:"clustersRemoved"`
	MaxFailureBreach  bool               `json:"maxFailureBreach"`
	RecheckAfter      *string            `json:"recheckAfter"`
	// Error is set (and the lists are empty) when OCM rejects the strategy.
	Error *string `json:"error,omitempty"`
}

type rolloutCase struct {
	Name                  string                          `json:"name"`
	Now                   string                          `json:"now"`
	Strategy              clusterv1alpha1.RolloutStrategy `json:"strategy"`
	DecisionGroups        []rolloutGroup                  `json:"decisionGroups"`
	ExistingClusterStatus []rolloutStatusIn               `json:"existingClusterStatus"`
	Expected              rolloutExpected                 `json:"expected"`
}

var statusNames = map[sdkv1alpha1.RolloutStatus]string{
	sdkv1alpha1.ToApply:     "ToApply",
	sdkv1alpha1.Progressing: "Progressing",
	sdkv1alpha1.Succeeded:   "Succeeded",
	sdkv1alpha1.Failed:      "Failed",
	sdkv1alpha1.TimeOut:     "TimeOut",
	sdkv1alpha1.Skip:        "Skip",
}

var allStatuses = []sdkv1alpha1.RolloutStatus{
	sdkv1alpha1.ToApply, sdkv1alpha1.Progressing, sdkv1alpha1.Succeeded,
	sdkv1alpha1.Failed, sdkv1alpha1.TimeOut, sdkv1alpha1.Skip,
}

func randIntOrPercent(rng *rand.Rand, maxInt int) intstr.IntOrString {
	if rng.Intn(2) == 0 {
		return intstr.FromInt32(int32(rng.Intn(maxInt + 1)))
	}
	return intstr.FromString(pick(rng, "0%", "10%", "20%", "25%", "30%", "33%", "33.3%", "50%", "66%", "75%", "90%", "100%", "150%"))
}

func randDeadline(rng *rand.Rand) string {
	return pick(rng, "", "None", "None", "0s", "90s", "5m", "10m", "30m", "1h", "90m", "2h")
}

func randMinSuccess(rng *rand.Rand) metav1.Duration {
	return metav1.Duration{Duration: pick(rng, 0, 0, 0, time.Minute, 5*time.Minute, 30*time.Minute, 2*time.Hour)}
}

// randTransition returns a transition time near now (or nil), including
// instants exactly on the 5m/10m/30m/1h/90m/2h boundaries.
func randTransition(rng *rand.Rand) *metav1.Time {
	if rng.Intn(8) == 0 {
		return nil
	}
	var d time.Duration
	switch rng.Intn(3) {
	case 0: // exact boundary
		d = pick(rng, 0, 90*time.Second, time.Minute, 5*time.Minute, 10*time.Minute, 30*time.Minute, time.Hour, 90*time.Minute, 2*time.Hour)
	case 1: // a second either side of a boundary
		d = pick(rng, 90*time.Second, time.Minute, 5*time.Minute, 10*time.Minute, 30*time.Minute, time.Hour, 90*time.Minute, 2*time.Hour) + time.Duration(pick(rng, -1, 1))*time.Second
	default:
		d = time.Duration(rng.Intn(3*3600)) * time.Second
	}
	t := now.Add(-d)
	if rng.Intn(20) == 0 {
		t = now.Add(time.Duration(1+rng.Intn(600)) * time.Second) // in the future
	}
	return &metav1.Time{Time: t}
}

var groupNamePool = []string{"canary", "prod", "east", "west", ""}

func randMandatory(rng *rand.Rand, groups []rolloutGroup) clusterv1alpha1.MandatoryDecisionGroups {
	var m clusterv1alpha1.MandatoryDecisionGroups
	n := pick(rng, 0, 0, 1, 1, 2)
	for i := 0; i < n; i++ {
		if rng.Intn(2) == 0 {
			name := pick(rng, "canary", "prod", "east", "missing")
			m.MandatoryDecisionGroups = append(m.MandatoryDecisionGroups, clusterv1alpha1.MandatoryDecisionGroup{GroupName: name})
		} else {
			idx := int32(rng.Intn(len(groups) + 1))
			m.MandatoryDecisionGroups = append(m.MandatoryDecisionGroups, clusterv1alpha1.MandatoryDecisionGroup{GroupIndex: idx})
		}
	}
	return m
}

func randStrategy(rng *rand.Rand, groups []rolloutGroup, kind clusterv1alpha1.RolloutType) clusterv1alpha1.RolloutStrategy {
	s := clusterv1alpha1.RolloutStrategy{Type: kind}
	nilSub := rng.Intn(15) == 0
	switch kind {
	case clusterv1alpha1.All:
		if !nilSub {
			s.All = &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{
				ProgressDeadline: randDeadline(rng),
				MinSuccessTime:   randMinSuccess(rng),
			}}
		}
	case clusterv1alpha1.Progressive:
		if !nilSub {
			s.Progressive = &clusterv1alpha1.RolloutProgressive{
				RolloutConfig: clusterv1alpha1.RolloutConfig{
					ProgressDeadline: randDeadline(rng),
					MinSuccessTime:   randMinSuccess(rng),
					MaxFailures:      randIntOrPercent(rng, 3),
				},
				MandatoryDecisionGroups: randMandatory(rng, groups),
				MaxConcurrency:          randIntOrPercent(rng, 6),
			}
		}
	case clusterv1alpha1.ProgressivePerGroup:
		if !nilSub {
			s.ProgressivePerGroup = &clusterv1alpha1.RolloutProgressivePerGroup{
				RolloutConfig: clusterv1alpha1.RolloutConfig{
					ProgressDeadline: randDeadline(rng),
					MinSuccessTime:   randMinSuccess(rng),
					MaxFailures:      randIntOrPercent(rng, 3),
				},
				MandatoryDecisionGroups: randMandatory(rng, groups),
			}
		}
	}
	return s
}

func randRolloutInput(rng *rand.Rand) ([]rolloutGroup, []sdkv1alpha1.ClusterRolloutStatus) {
	nGroups := 1 + rng.Intn(4)
	nClusters := pick(rng, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15)
	groups := make([]rolloutGroup, nGroups)
	for i := range groups {
		groups[i] = rolloutGroup{GroupIndex: int32(i), GroupName: pick(rng, groupNamePool...), Clusters: []string{}}
	}
	var clusters []string
	for i := 0; i < nClusters; i++ {
		name := fmt.Sprintf("c%02d", i+1)
		clusters = append(clusters, name)
		g := rng.Intn(nGroups)
		groups[g].Clusters = append(groups[g].Clusters, name)
	}
	var statuses []sdkv1alpha1.ClusterRolloutStatus
	for _, c := range clusters {
		if rng.Intn(4) == 0 {
			continue // no status: the handler adds it as ToApply
		}
		statuses = append(statuses, sdkv1alpha1.ClusterRolloutStatus{
			ClusterName:        c,
			Status:             pick(rng, allStatuses...),
			LastTransitionTime: randTransition(rng),
		})
	}
	// Clusters no longer decided.
	for i := 0; i < pick(rng, 0, 0, 0, 1, 2); i++ {
		statuses = append(statuses, sdkv1alpha1.ClusterRolloutStatus{
			ClusterName:        fmt.Sprintf("gone%d", i+1),
			Status:             pick(rng, allStatuses...),
			LastTransitionTime: randTransition(rng),
		})
	}
	rng.Shuffle(len(statuses), func(i, j int) { statuses[i], statuses[j] = statuses[j], statuses[i] })
	return groups, statuses
}

func toStatusOut(xs []sdkv1alpha1.ClusterRolloutStatus) []rolloutStatusOut {
	out := []rolloutStatusOut{}
	for _, x := range xs {
		o := rolloutStatusOut{
			ClusterName: x.ClusterName,
			Status:      statusNames[x.Status],
			GroupKey:    groupKeyOut{GroupIndex: x.GroupKey.GroupIndex, GroupName: x.GroupKey.GroupName},
		}
		if x.LastTransitionTime != nil {
			o.LastTransitionTime = rfc3339(&x.LastTransitionTime.Time)
		}
		if x.RecheckTime != nil {
			o.TimeOutTime = rfc3339(&x.RecheckTime.Time)
		}
		out = append(out, o)
	}
	return out
}

func runRollout(name string, strategy clusterv1alpha1.RolloutStrategy, groups []rolloutGroup, statuses []sdkv1alpha1.ClusterRolloutStatus) rolloutCase {
	sdkv1alpha1.RolloutClock = testingclock.NewFakeClock(now)
	c := rolloutCase{Name: name, Now: *rfc3339(&now), Strategy: strategy, DecisionGroups: groups, ExistingClusterStatus: []rolloutStatusIn{}}
	for _, s := range statuses {
		in := rolloutStatusIn{ClusterName: s.ClusterName, Status: statusNames[s.Status]}
		if s.LastTransitionTime != nil {
			in.LastTransitionTime = rfc3339(&s.LastTransitionTime.Time)
		}
		c.ExistingClusterStatus = append(c.ExistingClusterStatus, in)
	}
	groupsMap := sdkv1beta1.ClusterGroupsMap{}
	for _, g := range groups {
		groupsMap[sdkv1beta1.GroupKey{GroupName: g.GroupName, GroupIndex: g.GroupIndex}] = sets.New(g.Clusters...)
	}
	tracker := sdkv1beta1.NewPlacementDecisionClustersTrackerWithGroups(nil, nil, groupsMap)
	handler, err := sdkv1alpha1.NewRolloutHandler[struct{}](tracker, func(string, struct{}) (sdkv1alpha1.ClusterRolloutStatus, error) {
		return sdkv1alpha1.ClusterRolloutStatus{}, nil
	})
	if err != nil {
		panic(err)
	}
	// The handler sorts its copy of the list; hand it a copy so the input recorded above stays as given.
	in := append([]sdkv1alpha1.ClusterRolloutStatus(nil), statuses...)
	_, res, err := handler.GetRolloutCluster(strategy, in)
	c.Expected = rolloutExpected{
		ClustersToRollout: toStatusOut(res.ClustersToRollout),
		ClustersTimeOut:   toStatusOut(res.ClustersTimeOut),
		ClustersRemoved:   toStatusOut(res.ClustersRemoved),
		MaxFailureBreach:  res.MaxFailureBreach,
	}
	if res.RecheckAfter != nil {
		s := res.RecheckAfter.String()
		c.Expected.RecheckAfter = &s
	}
	if err != nil {
		e := err.Error()
		c.Expected.Error = &e
	}
	return c
}

func rolloutCases(rng *rand.Rand) []rolloutCase {
	var cases []rolloutCase
	kinds := []clusterv1alpha1.RolloutType{clusterv1alpha1.All, clusterv1alpha1.Progressive, clusterv1alpha1.ProgressivePerGroup}
	for _, kind := range kinds {
		n := 100
		if kind == clusterv1alpha1.All {
			n = 60
		}
		for i := 0; i < n; i++ {
			groups, statuses := randRolloutInput(rng)
			strategy := randStrategy(rng, groups, kind)
			cases = append(cases, runRollout(fmt.Sprintf("%s-%03d", kind, i+1), strategy, groups, statuses))
		}
	}
	// Values OCM rejects or reads in a surprising way.
	odd := []struct {
		name string
		s    clusterv1alpha1.RolloutStrategy
	}{
		{"bad-deadline-unit", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "5x"}}}},
		{"bad-deadline-fraction", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "1.5h"}}}},
		{"deadline-compound", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "1h30m"}}}},
		{"deadline-milliseconds", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "90ms"}}}},
		{"deadline-lowercase-none", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "none"}}}},
		{"bad-max-concurrency-string", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromString("three")}}},
		{"bad-max-failures-string", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{RolloutConfig: clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromString("2")}}}},
		{"bad-max-failures-percent", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{RolloutConfig: clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromString("x%")}}}},
		{"negative-max-concurrency", clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(-2)}}},
		{"unknown-type", clusterv1alpha1.RolloutStrategy{Type: "Canary"}},
		{"empty-type", clusterv1alpha1.RolloutStrategy{}},
	}
	for _, o := range odd {
		groups, statuses := randRolloutInput(rng)
		cases = append(cases, runRollout("odd-"+o.name, o.s, groups, statuses))
	}
	return cases
}
