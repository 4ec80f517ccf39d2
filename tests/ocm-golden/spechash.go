package main

import "math/rand"

type specHashCase struct{}

func specHashCases(rng *rand.Rand) ([]specHashCase, error) { return nil, nil }
