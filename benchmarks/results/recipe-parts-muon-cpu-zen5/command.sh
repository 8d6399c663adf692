#!/usr/bin/env bash
# What each ingredient of the Muon recipe (configs/speedrun_muon_cifar10.yaml as of 5105418) is worth
# on a Zen 5 EPYC: the recipe is the baseline, each arm takes one ingredient out (--design single;
# silu instead swaps GELU for SiLU in the net's groups, as hiverge/cifar10-speedrun has it; ns5_fp32
# runs Muon's Newton-Schulz iteration as 5 fp32 steps, the recipe before 5105418), the full
# 50,000-image split, 9 epochs, one seed, time to Hiverge's 3-seed mean accuracy on this machine
# (0.9073) and the final held-out accuracy. From a worktree at a fixed commit (ddd44d0), both
# cores, nothing else running; re-running it continues where it stopped.
cd ../measure-parts
export PYTHONPATH=$PWD  # this worktree's quicktrain, in the ablation and in each arm's process
exec python -m quicktrain ablate --config configs/speedrun_muon_cifar10.yaml \
  --dataset imagefolder:../shared/datasets/cifar10-jpeg --design single \
  --techniques no_tta,no_muon,no_resize,no_lookahead,no_fixed_norm,ns5_fp32,no_altflip,no_reflect,silu,no_channels_last,no_retain \
  --switch silu=model.model_kwargs=[activation=silu] --switch no_muon=optim.optimizer=sgd,optim.lr=1.5 \
  --switch no_resize=data.low_res=null,data.low_res_epochs=0,data.mid_res=null,data.mid_res_epochs=0 \
  --switch no_altflip=data.flip=random --switch no_lookahead=optim.lookahead=null --switch no_tta=run.tta=off \
  --switch no_retain=techniques.cpu_allocator=system --switch no_channels_last=techniques.channels_last=false \
  --switch no_fixed_norm=optim.muon_fixed_norm=false --switch no_reflect=data.crop_fill=zero \
  --switch ns5_fp32=optim.muon_ns_steps=5,optim.muon_precision=float32 \
  --repeats 1 --target-accuracy 0.9073 --no-stop-at-target \
  --no-tensorboard --no-progress --out ../measure-runs/recipe-parts-zen5
