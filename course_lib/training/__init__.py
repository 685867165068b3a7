"""The reference trainings an instructor runs: configuration, models, the trainers, evaluation.

- `config`: one dataclass per command (`SFTConfig`, `GRPOConfig`, `PPOConfig`, `DPOConfig`, `EvalConfig`),
  YAML + `key=value`;
- `models`: loading the policy and tokenizer (device, dtype, attention backend), `set_seed`,
  `TemperatureScaled`;
- `common`: what both trainers share (optimizer and schedule, data order, evaluation, the
  bookkeeping around each step, data parallelism);
- `checkpoint`: checkpoints that resume exactly, and `metrics.jsonl`;
- `sft_trainer.train_sft`, `grpo_trainer.train_grpo`: the two trainers, each a short loop around
  its step: SFT's graded `course_lib.sft.sft_train_step`; for GRPO, the update of one rollout
  batch, by default `grpo_update.packed_grpo_train_step` (the graded plain loop
  `course_lib.grpo.grpo_train_step` with rows of advantage 0 skipped and the rest packed by
  length: the same update, parameter for parameter);
- `ppo_trainer.train_ppo`: PPO with a critic (`critic.Critic`), the GRPO trainer's loop with
  `ppo_update.PPOUpdate` as its update (GAE advantages, actor and critic trained side by side);
- `dpo_trainer.train_dpo`: DPO from preference pairs built once (`build_pairs`: on-policy samples or gold
  solutions against a changed answer) and their reference log-probs computed once, a loop around
  `dpo_train_step` (the graded `course_lib.dpo.sequence_log_probs` and `dpo_loss`);
- `evaluation`: format and answer accuracy, a report of generations, the exact KL to a reference;
- `plots`: curves of a run; `cli`: `python -m course_lib.training sft|grpo|ppo|dpo|eval`;
- `demo`: `make demo` (`python -m course_lib.training.demo`), base -> SFT -> GRPO on the tiny world.
"""
