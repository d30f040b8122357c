"""Learning-rate schedulers with PyTorch's ``torch.optim.lr_scheduler`` semantics.

A scheduler writes ``group["lr"]`` of its optimizer's parameter groups. As in PyTorch:

- construction performs step 0 (``last_epoch`` goes from -1 to 0) and sets ``initial_lr`` in
  every group; resuming with ``last_epoch >= 0`` needs ``initial_lr`` already there;
- ``step()`` uses the *chainable* recurrence from the group's current ``lr`` (so schedulers
  can be stacked), ``step(epoch)`` (deprecated in PyTorch) jumps with the closed form;
- ``state_dict()`` is every attribute except the optimizer (and functions, which are not
  state), ``load_state_dict`` puts them back.

The recurrences are PyTorch's, term for term, so the floating-point sequence is the same.
"""
from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "LambdaLR", "LinearLR", "OneCycleLR", "SequentialLR"]


def _format_param(name: str, optimizer: Optimizer, param) -> list:
    """One value per parameter group: a list/tuple must have one per group, a scalar is
    repeated."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
        return list(param)
    return [param] * len(optimizer.param_groups)


class LRScheduler:
    """Base class: subclasses implement ``get_lr()`` (the chainable step) and, where a closed
    form exists, ``_get_closed_form_lr()`` (used by ``step(epoch)``).

    Args:
        optimizer: the optimizer whose groups' ``lr`` is scheduled.
        last_epoch: the index of the last step taken; -1 starts a new schedule.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """Step 0: the first learning rate of the schedule."""
        self._step_count = 0
        self.step()

    def get_lr(self) -> list:
        """The learning rates of the step ``last_epoch`` has just reached."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set, one per parameter group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one step (or, deprecated, jump to ``epoch``) and write the groups' ``lr``."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            # PyTorch's check for the pre-1.1 order (scheduler before optimizer), which skips
            # the first value of the schedule.
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                          "In PyTorch 1.1.0 and later, you should call them in the opposite "
                          "order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to "
                          "do this will result in PyTorch skipping the first value of the "
                          "learning rate schedule.", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn("The epoch parameter in `scheduler.step()` was not necessary and is "
                          "being deprecated where possible. Please use `scheduler.step()` to "
                          "step the scheduler.", UserWarning, stacklevel=2)
            values = self._jump_to(epoch)
        self._set(values)

    def _jump_to(self, epoch: int) -> list:
        self.last_epoch = epoch
        if hasattr(self, "_get_closed_form_lr"):
            return self._get_closed_form_lr()
        return self.get_lr()

    def _set(self, values) -> None:
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer (plain values: the scheduler's own state)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the attributes :meth:`state_dict` returned."""
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # PyTorch's older name, still importable there


class StepLR(LRScheduler):
    """``lr = base_lr * gamma ** (last_epoch // step_size)``.

    Args:
        optimizer: the optimizer.
        step_size: the period of the decay, in steps.
        gamma: the multiplicative factor of each decay.
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``lr = base_lr * gamma ** (number of milestones <= last_epoch)``; a milestone given twice
    decays twice.

    Args:
        optimizer: the optimizer.
        milestones: the steps at which to decay (increasing).
        gamma: the multiplicative factor of each decay.
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in self.optimizer.param_groups]
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``lr = base_lr * gamma ** last_epoch``.

    Args:
        optimizer: the optimizer.
        gamma: the multiplicative factor of each step.
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2``, stepped
    by PyTorch's recurrence (which keeps following the cosine past ``T_max``).

    Args:
        optimizer: the optimizer.
        T_max: the number of steps of half a period.
        eta_min: the smallest learning rate.
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups, t, T, eta = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if t == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and t > 0:
            # Resumed mid-schedule: there is no previous lr to chain from.
            return [eta + (base - eta) * (1 + math.cos(t * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            # The step after a minimum: the ratio below would divide by zero.
            return [g["lr"] + (base - eta) * (1 - math.cos(math.pi / T)) / 2
                    for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
                * (g["lr"] - eta) + eta for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``.

    Args:
        optimizer: the optimizer.
        lr_lambda: a function of the step, or a list of one per parameter group.
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict:
        """As PyTorch: functions are not saved; a callable object's ``__dict__`` is."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LinearLR(LRScheduler):
    """Multiply the learning rate by a factor going linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` steps, then keep it.

    Args:
        optimizer: the optimizer.
        start_factor: the factor at step 0, in (0, 1].
        end_factor: the factor from step ``total_iters`` on, in [0, 1].
        total_iters: the number of steps of the ramp.
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self.last_epoch > self.total_iters:
            return [g["lr"] for g in groups]
        span = self.end_factor - self.start_factor
        factor = 1.0 + span / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * span)
        return [g["lr"] * factor for g in groups]

    def _get_closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done)
                for base in self.base_lrs]


def _anneal_cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _anneal_linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the learning rate rises from ``max_lr / div_factor`` to ``max_lr``
    over ``pct_start`` of the steps, then falls to ``initial_lr / final_div_factor`` (with
    ``three_phase``, it first falls back to the initial rate, symmetrically, then to the
    minimum); the momentum (SGD's ``momentum`` or Adam's ``betas[0]``) moves the other way.

    Args:
        optimizer: the optimizer.
        max_lr: the peak learning rate (or one per group).
        total_steps: the number of steps of the cycle; or give ``epochs`` and
            ``steps_per_epoch``.
        epochs: the number of epochs (with ``steps_per_epoch``).
        steps_per_epoch: the number of steps per epoch.
        pct_start: the fraction of the cycle spent rising.
        anneal_strategy: ``"cos"`` or ``"linear"``.
        cycle_momentum: also cycle the momentum between ``base_momentum`` and ``max_momentum``.
        base_momentum: the momentum at the peak learning rate (or one per group).
        max_momentum: the momentum at the ends of the cycle (or one per group).
        div_factor: ``initial_lr = max_lr / div_factor``.
        final_div_factor: ``min_lr = initial_lr / final_div_factor``.
        three_phase: use three phases instead of two (see above).
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * n) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * n) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum",
                 "end_momentum": "max_momentum"},
                {"end_step": n - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * n) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": n - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]
        # A name, not a function, so that the state dict stays plain data.
        self._anneal_func_type = anneal_strategy

        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, peak in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = peak / div_factor
                group["max_lr"] = peak
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            highs = _format_param("max_momentum", optimizer, max_momentum)
            lows = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for high, low, group in zip(highs, lows, optimizer.param_groups):
                    self._set_momentum(group, high)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        fn = _anneal_cos if self._anneal_func_type == "cos" else _anneal_linear
        return fn(start, end, pct)

    def get_lr(self):
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                self._set_momentum(group, momentum)
        return lrs


class SequentialLR(LRScheduler):
    """Run ``schedulers[i]`` between ``milestones[i-1]`` and ``milestones[i]``; each one after
    the first starts from its step 0 at its milestone.

    Args:
        optimizer: the optimizer all the schedulers belong to.
        schedulers: the schedulers, in order.
        milestones: the steps at which to switch (one fewer than schedulers).
        last_epoch: the index of the last step (-1 to start).
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got no "
                             "scheduler.")
        for idx, sched in enumerate(schedulers):
            if not hasattr(sched, "optimizer"):
                raise TypeError(f"{type(self).__name__} at index {idx} should have "
                                "`optimizer` as its attribute.")
            if sched.optimizer is not optimizer:
                raise ValueError(f"{type(self).__name__} expects all schedulers to belong to "
                                 f"the same optimizer, but got scheduler "
                                 f"{type(sched).__name__} at index {idx} has "
                                 f"{sched.optimizer}, which is different from "
                                 f"{type(optimizer).__name__}.")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be "
                             "one more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # Each scheduler took its step 0 when it was built; undo them, then take the first's.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for sched in self._schedulers:
            sched.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self) -> None:
        """Advance one step, switching to the next scheduler (at its step 0) at a milestone."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            # PyTorch calls ``scheduler.step(0)``: the closed form at step 0 (without its
            # deprecation warning here, which would be about our call, not the user's).
            sched._step_count += 1
            sched._set(sched._jump_to(0))
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self) -> dict:
        """Its own attributes, with each scheduler's state dict under ``_schedulers``."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        scheds = state.pop("_schedulers")
        self.__dict__.update(state)
        for mine, saved in zip(self._schedulers, scheds):
            mine.load_state_dict(saved)
