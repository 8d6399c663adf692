#!/usr/bin/env bash
# issue 33 pilot: each family's fp32 baseline, seed 0, 2000 train / 1000 test CIFAR-10 JPEG images, 32 px,
# 10 epochs, one core (taskset -c 1), one thread. Measures what target every baseline can reach.
export PYTHONPATH=. OMP_NUM_THREADS=1
cd "$(dirname "$0")/../../.."
common="--dataset imagefolder:../shared/datasets/cifar10-jpeg --max-train-samples 2000 --max-test-samples 1000 --epochs 10 --amp off --no-progress"
taskset -c 1 python -m quicktrain train $common --model efficientnet_b0 --optimizer adamw --lr 0.002 --weight-decay 0.05 --out ../measure-out/pilot/efficientnet_b0
taskset -c 1 python -m quicktrain train $common --model resnet18 --optimizer sgd --lr 0.2 --out ../measure-out/pilot/resnet18
taskset -c 1 python -m quicktrain train $common --model vit_tiny --optimizer adamw --lr 0.001 --weight-decay 0.05 --out ../measure-out/pilot/vit_tiny
