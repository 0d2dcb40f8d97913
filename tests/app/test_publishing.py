"""Publishing a run's successor to the Hugging Face Hub: exactly the successor's files, a card rewritten from
results.json, every refusal at once, the hub's errors in one line. No network: a stand-in records the hub calls."""

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from app_runs import compose_config, tiny_run_overrides
from conftest import make_tiny_rte_glue_dir, make_tiny_tokenizer, save_tiny_base
from huggingface_hub import ModelCard, constants
from huggingface_hub.errors import HTTPError
from huggingface_hub.utils import filter_repo_objects
from results_records import a_run, an_embedding_run, plant, plant_new_kind

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import run
from theseus_pl.app.ship.model_card import model_card
from theseus_pl.app.ship.publishing import NO_TOKEN
from theseus_pl.publish import main

pytestmark = pytest.mark.quick

REPO = "org/tiny-rte"
SUCCESSOR_FILES = {
    "README.md", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx",
    "onnx/model_int8.onnx",
}  # fmt: skip


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A deployed tiny run's folder as a run leaves it, with the files that are not the model: its checkpoints
    (kept), the CSV log, Hydra's config, a W&B run and a log."""
    folder = tmp_path_factory.mktemp("publish")
    base = save_tiny_base(folder / "base", make_tiny_tokenizer(folder))
    overrides = tiny_run_overrides(base, make_tiny_rte_glue_dir(folder / "glue"), folder)
    # int8 shipped whatever the timings say: the card's code runs the model it ships
    deploy = ["deploy.onnx=true", "deploy.quantize=int8", "deploy.target=onnx_int8", "deploy.batch_sizes=[1]",
              "deploy.repeats=1"]  # fmt: skip
    run(compose_config(*overrides, *deploy, "checkpoint.keep=true", "model.hub_id=org/tiny-base"))
    run_dir = folder / "run"
    for name in (".hydra/config.yaml", "train.log", "wandb/offline-run-1/files/config.yaml"):
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text("not the model\n")
    assert any((run_dir / "checkpoints").iterdir()) and (run_dir / "csv" / "metrics.csv").is_file()
    return run_dir


@pytest.fixture
def a_copy(finished_run: Path, tmp_path: Path) -> Path:
    """The finished run copied, for a test that writes to it."""
    return shutil.copytree(finished_run, tmp_path / "run")


@pytest.fixture
def no_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine where huggingface_hub finds no token: none in the environment, no `hf auth login`."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))


class RecordingHub:
    """Stands in for ``huggingface_hub.HfApi``: records each call and what would go up; raises ``error`` at ``fail``."""

    def __init__(self, fail: str | None = None, error: Exception | None = None) -> None:
        self.calls, self.fail, self.error = [], fail, error
        self.uploaded: dict[str, bytes] = {}  # path in the repo -> the file's content, as the hub would get it

    def create_repo(self, repo_id, **options):
        self.calls.append(("create_repo", repo_id, options))
        if self.fail == "create_repo":
            raise self.error
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **options):
        self.calls.append(("upload_folder", options))
        if self.fail == "upload_folder":
            raise self.error
        folder = Path(options["folder_path"])
        present = [path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()]
        sent = list(filter_repo_objects(present, allow_patterns=options["allow_patterns"]))  # as upload_folder picks
        for name in filter_repo_objects(list(self.uploaded), allow_patterns=options["delete_patterns"]):
            if name not in sent:  # as upload_folder deletes: the repo's files matching them that this commit lacks
                del self.uploaded[name]
        for name in sent:
            self.uploaded[name] = (folder / name).read_bytes()


def dry_run(run_dir: Path, capsys: pytest.CaptureFixture) -> tuple[dict[str, int], dict, str]:
    """The files a dry run lists (path -> bytes), the card metadata it shows, and its whole output."""
    main([str(run_dir), "--repo-id", REPO, "--dry-run"])
    out = capsys.readouterr().out
    listed = {name: int(size.replace(",", "")) for size, name in re.findall(r"^ +([\d,]+)  (\S+)", out, re.M)}
    (header,) = re.findall(r"^---\n(.*?)\n---$", out, re.S | re.M)
    return listed, yaml.safe_load(header), out


def refusal(argv: list[str], capsys: pytest.CaptureFixture) -> list[str]:
    """The problems a refused command lists; it must exit with status 2."""
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("Nothing was published:\n")
    return [line.removeprefix("- ") for line in error.splitlines()[1:]]


def test_a_dry_run_lists_exactly_the_successors_files_and_changes_nothing(finished_run, no_token, capsys):
    successor = finished_run / "successor"
    card_before = (successor / "README.md").read_text()
    listed, _, out = dry_run(finished_run, capsys)
    assert set(listed) == SUCCESSOR_FILES  # no checkpoint, log, config, W&B run or results.json
    assert all(listed[name] == (successor / name).stat().st_size for name in SUCCESSOR_FILES - {"README.md"})
    card = str(model_card(read_run(finished_run / "results.json", TaskModelResults), REPO))
    assert listed["README.md"] == len(card.encode())  # the card as it will go up: rewritten for the repo
    assert f"Would publish {successor} to {REPO} (public if created" in out
    assert out.endswith(f"Dry run: nothing was uploaded. The model would be at https://huggingface.co/{REPO}\n")
    assert (successor / "README.md").read_text() == card_before


def test_the_card_header_carries_the_hubs_metadata(finished_run, capsys):
    _, header, _ = dry_run(finished_run, capsys)
    results = read_run(finished_run / "results.json", TaskModelResults)
    assert header["library_name"] == "transformers" and header["pipeline_tag"] == "text-classification"
    assert header["base_model"] == "org/tiny-base" and header["datasets"] == ["nyu-mll/glue"]
    (entry,) = header["model-index"][0]["results"]
    assert entry["dataset"]["type"] == "nyu-mll/glue" and entry["dataset"]["split"] == "validation"
    assert entry["metrics"] == [
        {"type": "accuracy", "value": results.successor.metrics["accuracy"], "name": "accuracy"}
    ]


def test_publishing_creates_the_repo_and_uploads_the_successor_folder_alone(a_copy, no_token, capsys):
    successor = a_copy / "successor"
    (successor / "README.md").write_text("a card from before the deployment was redone\n")
    (successor / ".ipynb_checkpoints").mkdir()
    (successor / ".ipynb_checkpoints" / "README-checkpoint.md").write_text("an editor's copy\n")
    hub = RecordingHub()
    url = main([str(a_copy), "--repo-id", REPO, "--private", "--token", "hf_test"], api=hub)

    assert url == f"https://huggingface.co/{REPO}"
    assert hub.calls[0] == ("create_repo", REPO, {"private": True, "exist_ok": True, "repo_type": "model"})
    (_, upload), = hub.calls[1:]  # fmt: skip
    assert (upload["repo_id"], upload["folder_path"], upload["repo_type"]) == (REPO, successor, "model")
    assert upload["commit_message"] == "RTE: 2-layer successor (theseus_curriculum), from theseus_pl"
    assert set(hub.uploaded) == SUCCESSOR_FILES
    card = str(model_card(read_run(a_copy / "results.json", TaskModelResults), REPO))
    assert hub.uploaded["README.md"].decode() == card == (successor / "README.md").read_text()
    assert f'pipeline("text-classification", model="{REPO}")' in card
    assert f'onnxruntime.InferenceSession(hf_hub_download("{REPO}", "onnx/model_int8.onnx"))' in card
    assert capsys.readouterr().out.endswith(f"Published 7 files of {successor} to {url}\n")
    # Published again after a redeploy without its int8 model: the repo kept the old file, which no card named
    (successor / "onnx" / "model_int8.onnx").unlink()
    main([str(a_copy), "--repo-id", REPO, "--token", "hf_test"], api=hub)
    assert set(hub.uploaded) == SUCCESSOR_FILES - {"onnx/model_int8.onnx"}


def as_the_hub_serves_it(hub: RecordingHub, repo_id: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub as huggingface_hub reads it offline: the uploaded files as a snapshot of the repo in its cache."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    for name, content in hub.uploaded.items():
        (repo / "snapshots" / "0" / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / "snapshots" / "0" / name).write_bytes(content)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))


def test_the_published_cards_code_runs_on_the_repo_as_uploaded(a_copy, monkeypatch, tmp_path):
    hub = RecordingHub()
    main([str(a_copy), "--repo-id", REPO, "--token", "hf_test"], api=hub)
    as_the_hub_serves_it(hub, REPO, tmp_path / "hub", monkeypatch)
    pipeline_code, onnx_code = re.findall(r"```python\n(.*?)```", hub.uploaded["README.md"].decode(), re.S)
    exec(pipeline_code, {})
    namespace = {}
    exec(onnx_code, namespace)
    assert namespace["logits"].shape == (1, 2)


def test_a_token_from_the_environment_is_taken_and_an_unreachable_hub_is_one_line(a_copy, no_token, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")  # no --token: huggingface_hub's own lookup finds it
    card_before = (a_copy / "successor" / "README.md").read_text()
    with pytest.raises(SystemExit) as raised:
        main([str(a_copy), "--repo-id", REPO])  # the real HfApi, offline in the tests (HF_HUB_OFFLINE=1)
    message = raised.value.code  # huggingface_hub's words, in one line after ours
    assert message.startswith(f"Could not publish to {REPO}: Cannot reach https://huggingface.co/api/repos/create")
    assert "offline mode is enabled" in message and "\n" not in message
    assert (a_copy / "successor" / "README.md").read_text() == card_before  # no repo: the card is left as it was


@pytest.mark.parametrize(
    ("fail", "error", "message"),
    [
        ("create_repo", HTTPError("[Errno -2] Name or service not known"),
         "[Errno -2] Name or service not known"),
        ("upload_folder", OSError("403 Forbidden: you have no write access.\n\nCannot access content at: ..."),
         "403 Forbidden: you have no write access. Cannot access content at: ..."),
    ],
)  # fmt: skip
def test_the_hubs_errors_are_one_line_not_a_traceback(a_copy, fail, error, message):
    with pytest.raises(SystemExit) as raised:
        main([str(a_copy), "--repo-id", REPO, "--token", "hf_test"], api=RecordingHub(fail, error))
    assert raised.value.code == f"Could not publish to {REPO}: {message}"


def plant_run(
    folder: Path, files: tuple[str, ...] = ("config.json", "model.safetensors", "tokenizer.json"), **changes
) -> Path:
    """A finished run's folder without training: ``results.json`` and a successor of ``files``."""
    plant(folder, a_run(**changes))
    for name in files:
        (folder / "successor" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "successor" / name).write_bytes(b"{}")
    return folder


def test_a_pickled_successor_goes_up_whole_and_its_card_names_theseus_pl_as_its_library(tmp_path, capsys):
    pickled = replace(a_run().successor, format="pickled module")
    run_dir = plant_run(tmp_path / "run", ("config.json", "successor.pt", "tokenizer.json"), successor=pickled)
    listed, header, _ = dry_run(run_dir, capsys)
    assert set(listed) == {"README.md", "config.json", "successor.pt", "tokenizer.json"}
    assert header["library_name"] == "theseus_pl"  # transformers cannot load a pickled module


def plant_embedding_run(folder: Path) -> Path:
    """A finished sentence-embedding run's folder without training: its record, and a successor that is a real tiny
    sentence-transformers folder (a 4-layer BERT, mean pooling), as the run saves it."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    folder.mkdir(parents=True)
    encoder = Transformer(str(save_tiny_base(folder / "base", make_tiny_tokenizer(folder))))
    modules = [encoder, Pooling(encoder.get_embedding_dimension(), "mean")]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder / "successor"))
    record = an_embedding_run()
    plant(folder, replace(record, successor=replace(record.successor, dir=str(folder / "successor"))))
    return folder


def test_a_sentence_embedding_run_goes_up_as_a_sentence_transformers_model_its_card_loads(tmp_path, monkeypatch):
    run_dir, repo_id = plant_embedding_run(tmp_path / "run"), "org/tiny-embedding"
    hub = RecordingHub()
    main([str(run_dir), "--repo-id", repo_id, "--token", "hf_test"], api=hub)
    (_, upload) = hub.calls[1]
    assert upload["commit_message"] == "sentence embeddings, 3-layer successor (embedding_theseus), from theseus_pl"
    assert {"modules.json", "1_Pooling/config.json", "model.safetensors", "README.md"} <= set(hub.uploaded)
    card = ModelCard(hub.uploaded["README.md"].decode())  # the embedding card, rewritten for the repo
    assert card.data.pipeline_tag == "sentence-similarity" and card.data.library_name == "sentence-transformers"
    as_the_hub_serves_it(hub, repo_id, tmp_path / "hub", monkeypatch)
    (code,) = re.findall(r"```python\n(.*?)```", card.text, re.S)
    assert f'SentenceTransformer("{repo_id}")' in code
    namespace = {}
    exec(code, namespace)
    assert namespace["embeddings"].shape == (2, 32)  # two sentences, the tiny BERT's width: its mean pooling


def test_a_successor_its_users_could_not_load_is_refused_naming_what_it_lacks(tmp_path, capsys):
    """The folder went up as it was, under a card that shows how to load it."""
    run_dir = plant_run(tmp_path / "run", ("config.json", "model.safetensors"))  # no tokenizer
    assert refusal([str(run_dir), "--repo-id", REPO, "--dry-run"], capsys) == [
        f"{run_dir}/successor lacks a tokenizer, which the run wrote: rerun the run (resume=force) to export its "
        "successor whole."
    ]
    embedding = plant_embedding_run(tmp_path / "embedding")
    capsys.readouterr()  # what saving the tiny model printed
    shutil.rmtree(embedding / "successor" / "1_Pooling")
    assert refusal([str(embedding), "--repo-id", REPO, "--dry-run"], capsys)[0].startswith(
        f"{embedding}/successor lacks 1_Pooling/, which the run wrote"
    )
    (embedding / "successor" / "modules.json").unlink()
    assert refusal([str(embedding), "--repo-id", REPO, "--dry-run"], capsys)[0].startswith(
        f"{embedding}/successor lacks modules.json, which the run wrote"
    )


@pytest.mark.parametrize(
    ("make", "given", "problem"),
    [
        (lambda folder: folder.mkdir(), ".", "{run} is not a finished theseus_pl run: looked for results.json and "
         "successor/, no results.json and no successor/."),
        (lambda folder: None, ".", "{run} is not a folder: give a finished run's folder (it holds results.json and "
         "successor/)."),
        (lambda folder: plant(folder, a_run()), ".", "{run} is not a finished theseus_pl run: looked for "
         "results.json and successor/, no successor/."),
        (lambda folder: plant_run(folder / "0"), ".", "{run} is not a finished theseus_pl run: looked for "
         "results.json and successor/, no results.json and no successor/ (a multirun's folder? give one of its "
         "jobs, e.g. {run}/0)."),
        (plant_run, "successor", "{run}/successor is not a finished theseus_pl run: looked for results.json and "
         "successor/, no results.json and no successor/ (this is a run's successor/: give the run's folder, {run})."),
        (lambda folder: plant_run(folder, ("config.json", "tokenizer.json")), ".", "{run}/successor holds no "
         "exported model: looked for config.json and model.safetensors (or successor.pt, a pickled successor); "
         "rerun the run to finish its export."),
        (lambda folder: (plant_run(folder), (folder / "results.json").write_text("{}")), ".",
         "{run}/results.json: no predecessor: not a theseus_pl results.json, or a damaged one"),
    ],
    ids=["empty", "missing", "no successor", "multirun", "successor given", "no weights", "damaged results"],
)  # fmt: skip
def test_a_folder_that_is_not_a_finished_run_is_refused_saying_what_was_looked_for(
    tmp_path, capsys, make, given, problem
):
    run_dir = tmp_path / "run"
    make(run_dir)
    problems = refusal([str(run_dir / given), "--repo-id", REPO, "--dry-run"], capsys)
    assert problems == [problem.format(run=run_dir)]


def test_a_run_of_a_kind_with_no_card_writer_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    run_dir = plant_run(tmp_path / "run")
    plant_new_kind(run_dir, monkeypatch)  # read as a run of a new kind, which the card writer has not been given
    problems = refusal([str(run_dir), "--repo-id", REPO, "--dry-run"], capsys)
    assert problems == [
        f"{run_dir} is a run of kind 'sentence_embedding'; the model card knows runs of kind 'task_model', "
        "'language_model', 'embedding_model' only."
    ]


@pytest.mark.parametrize(
    ("repo_id", "problem"),
    [
        ("tiny-rte", "--repo-id 'tiny-rte' is not ORG/NAME: give your user or organisation, a slash and the model's "
         "name, e.g. --repo-id my-org/rte-6-layers."),
        ("org/tiny/rte", "--repo-id 'org/tiny/rte' is not ORG/NAME"),
        ("org/tiny rte", "--repo-id 'org/tiny rte' is not ORG/NAME"),
        ("org/tiny..rte", "--repo-id 'org/tiny..rte' is not a hub repo id: Cannot have -- or .. in repo_id"),
    ],
)  # fmt: skip
def test_a_repo_id_that_is_not_org_slash_name_is_refused_showing_it(tmp_path, capsys, repo_id, problem):
    (refused,) = refusal([str(plant_run(tmp_path / "run")), "--repo-id", repo_id, "--dry-run"], capsys)
    assert refused.startswith(problem)


def test_without_a_token_nothing_is_published_and_the_message_says_how_to_log_in(tmp_path, no_token, capsys):
    hub = RecordingHub()
    with pytest.raises(SystemExit) as raised:
        main([str(plant_run(tmp_path / "run")), "--repo-id", REPO], api=hub)
    assert raised.value.code == 2 and hub.calls == []
    assert capsys.readouterr().err == f"Nothing was published:\n- {NO_TOKEN}\n"
    assert "`hf auth login`" in NO_TOKEN and "HF_TOKEN" in NO_TOKEN and "--token" in NO_TOKEN


def test_every_problem_is_said_at_once(tmp_path, no_token, capsys):
    problems = refusal([str(tmp_path / "nowhere"), "--repo-id", "tiny-rte"], capsys)
    assert [problem.split(" ", 2)[:2] for problem in problems] == [
        ["--repo-id", "'tiny-rte'"], [str(tmp_path / "nowhere"), "is"], ["No", "Hugging"]
    ]  # fmt: skip
