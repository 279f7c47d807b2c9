"""``--dataset-option``: each dataset's options come from its loader's signature; an unknown
key or a value of the wrong type is an error (exit 2) naming the option, what it takes and
the dataset's options, where it was a TypeError traceback (exit 1); README and ``--help``
list them."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from scalebo.cli.main import main
from scalebo.data.dataset_options import check_dataset_options, dataset_options
from scalebo.data.datasets import DATASETS, list_datasets, load_dataset, register_dataset

README = Path(__file__).resolve().parents[1] / "README.md"
STEPLAW = ("its options: diverged_above (a number or null, default null), lr_digits (an "
           "integer, default 3)")
EPOCH = "its options: drop_highest_loss (an integer, default 0)"


def _signature(name: str) -> list[str]:
    return [p.name for p in inspect.signature(DATASETS[name].loader).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY]


def test_options_are_the_loaders_keyword_parameters():
    for name in list_datasets():
        assert list(dataset_options(name)) == _signature(name), name
    option = dataset_options("steplaw")["diverged_above"]
    assert option.expects() == "a number or null" and option.default is None


@pytest.mark.parametrize(("fit_args", "message"), [
    (["dataset:steplaw", "--dataset-option", "foo=1"],
     f"dataset 'steplaw' has no option 'foo'; {STEPLAW}"),
    (["dataset:steplaw", "--dataset-option", "lr_digit=2"],
     f"dataset 'steplaw' has no option 'lr_digit' (did you mean 'lr_digits'?); {STEPLAW}"),
    (["dataset:epoch_chinchilla", "--law", "chinchilla", "--dataset-option",
      "drop_highest_loss=abc"],
     f"dataset 'epoch_chinchilla': option drop_highest_loss expects an integer, got 'abc'; "
     f"{EPOCH}"),
    (["dataset:epoch_chinchilla", "--dataset-option", "drop_highest_loss=1.5"],
     f"dataset 'epoch_chinchilla': option drop_highest_loss expects an integer, got 1.5; "
     f"{EPOCH}"),
    (["dataset:steplaw", "--dataset-option", "diverged_above=high"],
     f"dataset 'steplaw': option diverged_above expects a number or null, got 'high'; "
     f"{STEPLAW}"),
])
@pytest.mark.parametrize("command", ["fit", "fragility"])
def test_a_bad_option_exits_2_naming_it_and_the_datasets_options(command, fit_args, message,
                                                                 capsys, tmp_path):
    # checked before any file is read: no data directory needed
    assert main([command, *fit_args, "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --dataset-option: {message}\n"


def test_values_are_converted_as_the_loader_takes_them():
    # YAML reads 1e-3 as text: a number option takes it; an int is a float for it
    assert check_dataset_options("steplaw", {"diverged_above": "1e-3", "lr_digits": 2}) == \
        {"diverged_above": 1e-3, "lr_digits": 2}
    assert check_dataset_options("steplaw", {"diverged_above": 4}) == {"diverged_above": 4.0}
    assert check_dataset_options("porian_isoflop", {"dataset": ["a", "b"], "decay": None}) == \
        {"dataset": ["a", "b"], "decay": None}
    with pytest.raises(ValueError, match=r"^dataset 'steplaw': option lr_digits expects an "
                                         r"integer, got True; its options: "):
        check_dataset_options("steplaw", {"lr_digits": True})
    with pytest.raises(ValueError, match=r"option dataset expects a string, a list of strings "
                                         r"or null, got \['a', 1\]"):
        check_dataset_options("porian_isoflop", {"dataset": ["a", 1]})


def test_the_library_checks_too_and_a_kwargs_loader_is_not_checked(tmp_path):
    with pytest.raises(ValueError, match=r"^dataset 'gemstones' has no option 'varient' "
                                         r"\(did you mean 'variant'\?\); its options: variant "
                                         r"\(a string, default 'hot'\), validation \(a string, "
                                         r"default 'main'\)$"):
        load_dataset("gemstones", data_dir=tmp_path, varient="hot")
    seen = {}
    register_dataset("_kw_test", lambda root, **kw: seen.update(kw), "test", overwrite=True)
    try:
        assert dataset_options("_kw_test") is None
        load_dataset("_kw_test", data_dir=tmp_path, anything=1)
        assert seen == {"anything": 1}
    finally:
        DATASETS.pop("_kw_test")


def test_help_lists_every_datasets_options_from_the_signatures(capsys):
    assert main(["fit", "--help"]) == 0
    text = capsys.readouterr().out
    assert "  epoch_chinchilla    drop_highest_loss  an integer (default 0)\n" in text
    assert ("  steplaw             diverged_above     a number or null (default null)\n"
            "                      lr_digits          an integer (default 3)\n") in text
    for name in list_datasets():
        block = text[text.index(f"  {name} "):]
        for option in _signature(name):
            assert re.search(rf"^ +({name} +)?{option} ", block, re.M), (name, option)


def test_readme_lists_every_datasets_options():
    rows = re.findall(r"^  \| `(\w+)` \| ((?:`\w+`(?:, )?)+) \|", README.read_text(), re.M)
    listed: dict[str, list[str]] = {}
    for name, options in rows:
        listed.setdefault(name, []).extend(re.findall(r"`(\w+)`", options))
    assert listed == {name: _signature(name) for name in list_datasets() if _signature(name)}
