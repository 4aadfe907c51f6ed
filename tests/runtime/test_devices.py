"""``--device``: every command that loads a model puts it on the chosen device; bad names are one-line errors."""

import pytest
import torch

from cselab.cli import main
from cselab.errors import CselabError
from cselab.models.sentence_model import load_model
from cselab.runtime import devices


@pytest.fixture(autouse=True)
def _reset_device():
    yield
    devices.set_inference_device("auto")


def test_loaded_models_go_to_the_inference_device(tiny_bert_dir, monkeypatch):
    # 'meta' stands in for a GPU here: a device other than the CPU that every tensor must reach (it is not a
    # device users may name, so it is put in place of the --device choice directly)
    monkeypatch.setattr(devices, "inference_device", lambda: torch.device("meta"))
    model = load_model(tiny_bert_dir)
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert {p.device.type for p in load_model(tiny_bert_dir, device="cpu").parameters()} == {"cpu"}


def test_auto_is_the_cpu_without_cuda():
    assert not torch.cuda.is_available()  # this test describes the CPU machine
    assert devices.pick_device("auto") == torch.device("cpu")


@pytest.mark.parametrize("name, message", [("cuda", "no CUDA GPU is available"), ("tpu9", "unknown device 'tpu9'")])
def test_bad_device_is_one_error(name, message):
    with pytest.raises(CselabError, match=message):
        devices.pick_device(name)


def test_cli_device_option(tiny_bert_dir, tmp_path, capsys):
    sentences = tmp_path / "s.txt"
    sentences.write_text("a man plays the guitar .\nthe dog runs\n")
    with pytest.raises(SystemExit) as exc:
        main(["encode", str(tiny_bert_dir), "--input", str(sentences), "--output", str(tmp_path / "e.npy"),
              "--device", "cuda:3"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and err.count("\n") == 0 and "error: device 'cuda:3' requested but no CUDA GPU" in err
    main(["encode", str(tiny_bert_dir), "--input", str(sentences), "--output", str(tmp_path / "e.npy"),
          "--device", "cpu"])
    assert "wrote" in capsys.readouterr().out


def test_test_scoring_after_training_uses_the_training_device(tiny_bert_dir, sts_home, tmp_path, monkeypatch):
    from cselab.config.run_config import load_config
    from cselab.models import sentence_model
    from cselab.training.runs import train_and_record
    from tests.helpers import write_corpus

    placed = []
    real_load = sentence_model.load_model

    def recording_load(*args, device=None, **kwargs):
        placed.append(device)
        return real_load(*args, device=device, **kwargs)

    monkeypatch.setattr(sentence_model, "load_model", recording_load)
    corpus = write_corpus(tmp_path / "c.txt", n=32)
    config = load_config(None, [f"model.backbone={tiny_bert_dir}", f"data.corpus={corpus}", "train.batch_size=8",
                                "train.max_steps=1", "train.eval_every=1", "model.max_length=12", "train.device=cpu",
                                f"train.output_dir={tmp_path / 'run'}"])
    train_and_record(config)
    assert placed == [torch.device("cpu")]
