package main

import "math/rand"

type placementCase struct{}

func placementCases(rng *rand.Rand) ([]placementCase, error) { return nil, nil }
