"""Named lists of mteb tasks, for ``cselab mteb MODEL --tasks NAME``.

``jtcse-zero-shot``: the zero-shot tasks JTCSE's tables name (JTCSE, Tables I-V), under the names mteb has them by:
the 45 text classification tasks of Table II, the 14 reranking tasks of Table III, the 15 bitext-mining tasks of
Table IV, STS22.v2 (Table V, its 18 language subsets) and the English STS subtasks of Table I's right half (STS17,
STS22, STSBenchmarkMultilingualSTS; mteb runs every subset of them). The paper's 45 retrieval tasks (Table VI) are
summarised there by metric, never named, so they are not in the list. Where the paper's label is shortened or
ambiguous, the choice is written beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

# (the paper's label, mteb's task name)
JTCSE_CLASSIFICATION = (
    ("AllegroReviews", "AllegroReviews"),
    ("AngryTweets", "AngryTweetsClassification"),
    ("ContractNLIInclusionOfVerbally...",
     "ContractNLIInclusionOfVerballyConveyedInformationLegalBenchClassification"),
    ("ContractNLIPermissibleAcquirement...",
     "ContractNLIPermissibleAcquirementOfSimilarInformationLegalBenchClassification"),
    ("ContractNLIPermissibleDevelopment...",
     "ContractNLIPermissibleDevelopmentOfSimilarInformationLegalBenchClassification"),
    ("CUADAntiAssignmentLegalBench", "CUADAntiAssignmentLegalBenchClassification"),
    ("CUADExclusivityLegalBench", "CUADExclusivityLegalBenchClassification"),
    ("CUADNoSolicitOfCustomersLegalBench", "CUADNoSolicitOfCustomersLegalBenchClassification"),
    ("CUADPostTerminationServicesLegalBench", "CUADPostTerminationServicesLegalBenchClassification"),
    ("CUADTerminationForConvenienceLegalBench", "CUADTerminationForConvenienceLegalBenchClassification"),
    ("CzechSoMeSentiment", "CzechSoMeSentimentClassification"),
    ("GujaratiNews", "GujaratiNewsClassification"),
    ("HinDialect", "HinDialectClassification"),
    ("IndonesianIdClickbait", "IndonesianIdClickbaitClassification"),
    ("InternationalCitizenshipQuestionsLegalBench", "InternationalCitizenshipQuestionsLegalBenchClassification"),
    ("KLUE-TC", "KLUE-TC"),
    ("Language", "LanguageClassification"),
    ("LearnedHandsDivorceLegalBench", "LearnedHandsDivorceLegalBenchClassification"),
    ("LearnedHandsDomesticViolenceLegalBench", "LearnedHandsDomesticViolenceLegalBenchClassification"),
    ("LearnedHandsFamilyLegalBench", "LearnedHandsFamilyLegalBenchClassification"),
    ("LearnedHandsHousingLegalBench", "LearnedHandsHousingLegalBenchClassification"),
    ("MacedonianTweetSentiment", "MacedonianTweetSentimentClassification"),
    ("MarathiNews", "MarathiNewsClassification"),
    ("MassiveIntent", "MassiveIntentClassification"),
    ("MassiveScenario", "MassiveScenarioClassification"),
    ("NorwegianParliament", "NorwegianParliamentClassification"),
    ("NYSJudicialEthicsLegalBench", "NYSJudicialEthicsLegalBenchClassification"),
    ("OPP115DataSecurityLegalBench", "OPP115DataSecurityLegalBenchClassification"),
    ("OPP115DoNotTrackLegalBench", "OPP115DoNotTrackLegalBenchClassification"),
    ("OPP115InternationalAndSpecific...", "OPP115InternationalAndSpecificAudiencesLegalBenchClassification"),
    ("OPP115PolicyChangeLegalBench", "OPP115PolicyChangeLegalBenchClassification"),
    ("OPP115ThirdPartySharingCollectionLegalBench", "OPP115ThirdPartySharingCollectionLegalBenchClassification"),
    ("OPP115UserChoiceControlLegalBench", "OPP115UserChoiceControlLegalBenchClassification"),
    ("OralArgumentQuestionPurposeLegalBench", "OralArgumentQuestionPurposeLegalBenchClassification"),
    ("PolEmo2", "PolEmo2.0-IN"),  # mteb has PolEmo2.0-IN and -OUT; the paper lists one PolEmo2 task: the IN one
    ("PunjabiNews", "PunjabiNewsClassification"),
    ("Scala", "ScalaClassification"),
    ("SCDBPTrainingLegalBench", "SCDBPTrainingLegalBenchClassification"),
    ("SentimentAnalysisHindi", "SentimentAnalysisHindi"),
    ("SinhalaNews", "SinhalaNewsClassification"),
    ("SiswatiNews", "SiswatiNewsClassification"),
    ("SlovakMovieReviewSentiment", "SlovakMovieReviewSentimentClassification"),
    ("TamilNews", "TamilNewsClassification"),
    ("TNews", "TNews"),
    ("TweetEmotion", "TweetEmotionClassification"),
)
JTCSE_RERANKING = (
    ("Alloprof", "AlloprofReranking"), ("AskUbuntuDupQuestions", "AskUbuntuDupQuestions"),
    ("CMedQAv2", "CMedQAv2-reranking"), ("ESCI", "ESCIReranking"), ("MindSmall", "MindSmallReranking"),
    ("MMarco", "MMarcoReranking"), ("NamaaMrTydi", "NamaaMrTydiReranking"), ("RuBQ", "RuBQReranking"),
    ("SciDocsRR", "SciDocsRR"), ("StackOverflowDupQuestions", "StackOverflowDupQuestions"),
    ("Syntec", "SyntecReranking"), ("T2", "T2Reranking"), ("VoyageMMarco", "VoyageMMarcoReranking"),
    ("WebLINXCandidates", "WebLINXCandidatesReranking"),
)
JTCSE_BITEXT = (
    ("BUCC", "BUCC"), ("BUCC.v2", "BUCC.v2"), ("DiaBla", "DiaBlaBitextMining"), ("Flores", "FloresBitextMining"),
    ("IN22Conv", "IN22ConvBitextMining"), ("IN22Gen", "IN22GenBitextMining"), ("LinceMT", "LinceMTBitextMining"),
    ("NollySenti", "NollySentiBitextMining"), ("NorwegianCourts", "NorwegianCourtsBitextMining"),
    ("NTREX", "NTREXBitextMining"), ("NusaTranslation", "NusaTranslationBitextMining"),
    ("Phinc", "PhincBitextMining"), ("RomaTales", "RomaTalesBitextMining"), ("Tatoeba", "Tatoeba"),
    ("TbilisiCityHall", "TbilisiCityHallBitextMining"),
)
JTCSE_STS = (("STS22.V2", "STS22.v2"), ("STS17", "STS17"), ("STS22", "STS22"),
             ("STSBM", "STSBenchmarkMultilingualSTS"))

TASK_LISTS: dict[str, tuple[str, ...]] = {
    "jtcse-zero-shot": tuple(name for _, name in (*JTCSE_CLASSIFICATION, *JTCSE_RERANKING, *JTCSE_BITEXT,
                                                   *JTCSE_STS)),
}


def expand_task_lists(names: Sequence[str]) -> list[str]:
    """``names`` with every list name (``jtcse-zero-shot``) replaced by its tasks, order kept, no task twice."""
    out: list[str] = []
    for name in names:
        out += TASK_LISTS.get(name, (name,))
    return list(dict.fromkeys(out))
