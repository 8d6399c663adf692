#!/usr/bin/env bash
# issue 33 pilot for RQ4's second dataset: each family's fp32 baseline, seed 0, mnist5k (a fixed class-balanced
# 2000 of its 4000 training digits, its whole 1000-digit test split), 32 px, batch 32 (batch 128 gave resnet18
# only 80 updates in 5 epochs: 0.45), one core (taskset -c 1), one thread. Measures what target every baseline reaches.
export PYTHONPATH=. OMP_NUM_THREADS=1
cd .
common="--dataset mnist5k --max-train-samples 2000 --amp off --no-progress --batch-size 32 --eval-every-steps 32"
taskset -c 1 python -m quicktrain train $common --epochs 5 --model resnet18 --optimizer sgd --lr 0.05 --out benchmarks/results/rq-grid-mnist5k-pilot/resnet18
taskset -c 1 python -m quicktrain train $common --epochs 5 --model vit_tiny --optimizer adamw --lr 0.001 --weight-decay 0.05 --out benchmarks/results/rq-grid-mnist5k-pilot/vit_tiny
taskset -c 1 python -m quicktrain train $common --epochs 10 --model efficientnet_b0 --optimizer adamw --lr 0.001 --weight-decay 0.05 --out benchmarks/results/rq-grid-mnist5k-pilot/efficientnet_b0
